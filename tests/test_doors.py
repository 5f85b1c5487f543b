"""One handler, every door: the same data, the same ledger entries and the same refusals.

Doors: the canonical path (`POST /api/mcp/tools/<tool>/`), its `{kwargs: {...}}` envelope, the sandbox
call (`POST /api/v1/dev/call/`) and the per-handler path (`POST /prism/<mega_tool>/<app>/<entity>/<op>`).
Also the finance and spare_parts handlers and the webhook event registry, seen through those doors.
"""

from __future__ import annotations

import uuid
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.keys.service import lookup_of
from prism.models import ApiKey, AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.ledger_support import seal_waiting, verified

CALL = "/api/v1/dev/call/"
DOORS = ("canonical", "kwargs", "sandbox", "prism_path")
LEDGER_DOOR = {"canonical": "rest", "kwargs": "rest", "sandbox": "sandbox", "prism_path": "prism_path"}
ENVELOPE_ERROR_KEYS = {"success", "error", "message", "tool_name"}
SANDBOX_ERROR_KEYS = {"error", "message", "tool_name"}


async def through(client: httpx.AsyncClient, door: str, headers: dict[str, str], mega_tool: str, app: str,
                  entity: str, operation: str, arguments: Any) -> tuple[int, Any]:
    """Call one handler through one door; check the door's own shape; answer (status, data or error)."""
    tool = f"prism_{mega_tool}"
    envelope = {"app": app, "entity": entity, "operation": operation, "arguments": arguments}
    if door == "canonical":
        r = await client.post(f"/api/mcp/tools/{tool}/", headers=headers, json=envelope)
    elif door == "kwargs":
        r = await client.post(f"/api/mcp/tools/{tool}/", headers=headers, json={"kwargs": envelope})
    elif door == "sandbox":
        r = await client.post(CALL, headers=headers, json={"name": tool, "arguments": envelope})
    else:
        r = await client.post(f"/prism/{mega_tool}/{app}/{entity}/{operation}", headers=headers, json=arguments)
    assert r.headers["content-type"].startswith("application/json"), r.text
    body = r.json()
    if door == "sandbox":
        if r.is_success:
            assert isinstance(body, dict) and "success" not in body and "tool_name" not in body, body
            return r.status_code, body
        assert SANDBOX_ERROR_KEYS <= set(body) <= SANDBOX_ERROR_KEYS | {"details"}, body
        assert body["tool_name"] == tool
        return r.status_code, {"error": body["error"], "message": body["message"], "details": body.get("details")}
    assert body["tool_name"] == tool, body
    if r.is_success:
        assert set(body) == {"success", "data", "tool_name"} and body["success"] is True, body
        return r.status_code, body["data"]
    assert ENVELOPE_ERROR_KEYS <= set(body) <= ENVELOPE_ERROR_KEYS | {"details"}, body
    assert body["success"] is False
    return r.status_code, {"error": body["error"], "message": body["message"], "details": body.get("details")}


async def crud(client: httpx.AsyncClient, ws: Workspace, entity: str, operation: str, arguments: Any, *,
               app: str = "spare_parts", label: str = "owner") -> httpx.Response:
    return await client.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers(label), json={
        "app": app, "entity": entity, "operation": operation, "arguments": arguments})


async def ok(client: httpx.AsyncClient, ws: Workspace, entity: str, operation: str, arguments: Any, *,
             app: str = "spare_parts", label: str = "owner") -> Any:
    r = await crud(client, ws, entity, operation, arguments, app=app, label=label)
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def ledger(db: Database, organization_id: str) -> list[AuditEntry]:
    await seal_waiting(db, organization_id)
    async with db.read() as s:
        rows = await s.execute(select(AuditEntry).where(AuditEntry.organization_id == organization_id)
                               .order_by(AuditEntry.seq))
        return list(rows.scalars())


def essence(entry: AuditEntry) -> tuple[Any, ...]:
    """What an entry says about the call itself (door, seq, hashes, time, the HTTP request's id and the entry's
    nonce aside)."""
    return (entry.organization_id, entry.tenant_id, entry.actor_user_id, entry.credential_id, entry.tool_name,
            entry.coordinate, entry.arguments_digest, entry.outcome, entry.error_code,
            tuple(sorted((k, v) for k, v in entry.detail.items() if k not in ("request_id", "nonce"))))


@pytest.fixture(scope="module")
async def shared(db: Database) -> Workspace:
    """One workspace for the tests that only add their own records (hashing passwords is what costs)."""
    factory = Factory(db)
    ws = await factory.workspace(roles=("owner", "viewer"))
    await factory.add_key(ws, "no_read_scope", scopes="mcp:write mcp:execute")
    return ws


def without_last_used(whoami: dict[str, Any]) -> dict[str, Any]:
    # last_used_at legitimately moves between two calls with the same key.
    return {**whoami, "key": {k: v for k, v in whoami["key"].items() if k != "last_used_at"}}


# --- the same handler through every door -------------------------------------------------------------

READ_SCENARIOS = {
    # scenario: (key label, arguments (None = the part's id), status, error code)
    "success": ("owner", None, 200, None),
    "not_found_id": ("owner", {"id": str(uuid.uuid4())}, 404, "not_found"),
    "permission_refusal": ("no_read_scope", None, 403, "permission_denied"),
    "invalid_arguments": ("owner", {"id": "x", "colour": "red"}, 400, "invalid_arguments"),
}


@pytest.mark.parametrize("scenario", list(READ_SCENARIOS))
async def test_spare_part_read_gives_same_answer_and_same_ledger_entry_on_every_door(
        client: httpx.AsyncClient, shared: Workspace, db: Database, scenario: str) -> None:
    ws = shared
    part = await ok(client, ws, "spare_part", "create", {"sku": f"P-{scenario}", "name": "Pump seal", "quantity": 4})
    label, arguments, status, code = READ_SCENARIOS[scenario]
    arguments = arguments or {"id": part["id"]}
    before = len(await ledger(db, ws.org.id))

    answers = [await through(client, door, ws.headers(label), "entity_crud", "spare_parts", "spare_part", "read",
                             arguments) for door in DOORS]

    assert {a[0] for a in answers} == {status}, answers
    assert all(a == answers[0] for a in answers), answers
    if code is None:
        assert answers[0][1] == part
    else:
        assert answers[0][1]["error"] == code
    entries = (await ledger(db, ws.org.id))[before:]
    assert [e.door for e in entries] == [LEDGER_DOOR[d] for d in DOORS]
    assert len({essence(e) for e in entries}) == 1, [essence(e) for e in entries]
    first = entries[0]
    assert first.coordinate == "entity_crud/spare_parts/spare_part/read"
    assert first.outcome == ("allowed" if code is None else "refused")
    assert first.error_code == code
    assert first.detail["status"] == status
    async with db.read() as s:
        key_id = (await s.execute(select(ApiKey.id).where(ApiKey.lookup == lookup_of(ws.keys[label])))).scalar_one()
    report = await verified(db, ws.org.id)
    assert first.credential_id == key_id
    assert [e.seq for e in entries] == list(range(before + 1, before + 5))
    assert len({e.entry_hash for e in entries}) == 4
    assert report.valid and report.tree_size == before + 4, report


async def test_spare_part_update_writes_the_same_way_on_every_door(
        client: httpx.AsyncClient, shared: Workspace, db: Database) -> None:
    ws = shared
    part = await ok(client, ws, "spare_part", "create", {"sku": "P-2", "name": "Bearing", "quantity": 1})
    args = {"id": part["id"], "quantity": 9, "location": "Aisle 4"}
    before = len(await ledger(db, ws.org.id))

    refused = [await through(client, door, ws.headers("viewer"), "entity_crud", "spare_parts", "spare_part",
                             "update", args) for door in DOORS]
    done = [await through(client, door, ws.headers(), "entity_crud", "spare_parts", "spare_part", "update", args)
            for door in DOORS]

    assert all(r[0] == 403 and r[1]["error"] == "permission_denied" for r in refused), refused
    assert all(r == refused[0] for r in refused)
    assert {r[0] for r in done} == {200}
    expected = {k: v for k, v in part.items() if k != "updated_at"} | {"quantity": 9, "location": "Aisle 4"}
    assert all({k: v for k, v in r[1].items() if k != "updated_at"} == expected for r in done), done
    entries = (await ledger(db, ws.org.id))[before:]
    assert [(e.door, e.outcome, e.error_code) for e in entries] == (
        [(LEDGER_DOOR[d], "refused", "permission_denied") for d in DOORS]
        + [(LEDGER_DOOR[d], "allowed", None) for d in DOORS])
    assert len({essence(e)[5:7] for e in entries}) == 1  # one coordinate, one arguments digest


async def test_canonical_envelope_is_returned_on_every_branch(client: httpx.AsyncClient, shared: Workspace) -> None:
    ws = shared
    url = "/api/mcp/tools/prism_entity_crud/"
    cases = [
        ({"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}, 200),
        ({"app": "spare_parts", "entity": "spare_part", "operation": "read", "arguments": {"id": "nope"}}, 404),
        ({"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {"page": 0}}, 400),
        ({"app": "spare_parts", "entity": "gizmo", "operation": "list", "arguments": {}}, 404),
    ]
    for body, status in cases:
        r = await client.post(url, headers=ws.headers(), json=body)
        assert r.status_code == status, r.text
        payload = r.json()
        assert payload["success"] is (status == 200)
        assert payload["tool_name"] == "prism_entity_crud"
        assert ("data" in payload) is (status == 200)
        assert ("error" in payload and "message" in payload) is (status != 200)
    r = await client.post(url, headers={"Host": ws.host}, json=cases[0][0])
    assert r.status_code == 401
    assert r.json()["success"] is False and r.json()["tool_name"] == "prism_entity_crud"
    r = await client.post("/api/mcp/tools/prism_nothing_here/", headers=ws.headers(), json=cases[0][0])
    assert r.status_code == 404
    assert r.json() == {"success": False, "error": "tool_not_found", "message": r.json()["message"],
                        "tool_name": "prism_nothing_here"}


async def test_the_sandbox_calls_401_names_the_tool_the_body_sent_without_looking_it_up(
        client: httpx.AsyncClient, shared: Workspace) -> None:
    ws = shared
    arguments = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
    refusals = {}
    for name in ("prism_entity_crud", "prism_nothing_here"):
        for headers in ({"Host": ws.host}, {"Host": ws.host, "Authorization": "Bearer mcp_not_a_key"}):
            r = await client.post(CALL, headers=headers, json={"name": name, "arguments": arguments})
            assert r.status_code == 401, r.text
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert set(r.json()) == SANDBOX_ERROR_KEYS and r.json()["tool_name"] == name, r.text
            refusals[name, headers.get("Authorization")] = r.json()
    # A tool that exists and one that does not are refused alike: only the name sent differs.
    for credential in (None, "Bearer mcp_not_a_key"):
        real, unknown = refusals["prism_entity_crud", credential], refusals["prism_nothing_here", credential]
        assert {**real, "tool_name": None} == {**unknown, "tool_name": None}


@pytest.mark.parametrize("body", [
    b'{"name": "prism_entity_crud", ',  # not JSON
    b'["prism_entity_crud"]',  # not an object
    b'{"name": ["prism_entity_crud"]}',  # a name that is no string
    b'{"name": "prism_entity_crud\\u0000"}',  # NUL, refused in every JSON body
    b'{"name": "prism_entity_crud", "pad": "' + b"x" * (1024 * 1024) + b'"}',  # over the body cap
    b"",
], ids=["invalid_json", "array", "name_not_a_string", "nul", "too_large", "empty"])
async def test_the_sandbox_calls_401_names_no_tool_when_the_body_cannot_be_read(
        client: httpx.AsyncClient, shared: Workspace, body: bytes) -> None:
    r = await client.post(CALL, headers={"Host": shared.host, "Content-Type": "application/json"}, content=body)
    assert r.status_code == 401, r.text
    assert r.json() == {"error": "authentication_required", "message": r.json()["message"], "tool_name": None}


# --- legacy tools -------------------------------------------------------------------------------------


async def test_whoami_is_the_same_through_call_canonical_prism_path_and_me(
        client: httpx.AsyncClient, shared: Workspace, db: Database) -> None:
    ws = shared
    h = ws.headers()
    answers = [
        await client.post(CALL, headers=h, json={"name": "prism_whoami", "arguments": {}}),
        await client.post(CALL, headers=h, json={"name": "prism_whoami"}),
        await client.post("/api/mcp/tools/prism_whoami/", headers=h, json={}),
        await client.post("/api/mcp/tools/prism_whoami/", headers=h, json={"arguments": {}}),
        await client.post("/prism/report_query/core/caller/whoami", headers=h),
        await client.get("/api/v1/dev/me/", headers=h),
    ]
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    bare = [answers[0].json(), answers[1].json(), answers[5].json()]
    wrapped = [r.json() for r in answers[2:5]]
    assert [w["tool_name"] for w in wrapped] == ["prism_whoami", "prism_whoami", "prism_report_query"]
    results = [without_last_used(x) for x in bare + [w["data"] for w in wrapped]]
    assert all(x == results[0] for x in results)
    assert results[0]["tenant"]["subdomain"] == ws.tenant.subdomain
    assert results[0]["user"]["email"] == ws.emails["owner"]
    entries = (await ledger(db, ws.org.id))[-6:]
    assert {e.coordinate for e in entries} == {"report_query/core/caller/whoami"}
    assert [e.door for e in entries] == ["sandbox", "sandbox", "rest", "rest", "prism_path", "sandbox"]


async def test_legacy_tools_take_flat_parameters_on_call_and_canonical(
        client: httpx.AsyncClient, shared: Workspace) -> None:
    ws = shared
    h = ws.headers()
    # Flat parameters reach the handler: an unknown one is named, a bad value of a real one is named.
    for body, url in [({"name": "prism_whoami", "arguments": {"verbose": True}}, CALL),
                      ({"verbose": True}, "/api/mcp/tools/prism_whoami/")]:
        r = await client.post(url, headers=h, json=body)
        assert r.status_code == 400, r.text
        assert r.json()["error"] == "invalid_arguments"
        assert r.json()["details"]["errors"][0]["field"] == "verbose"
    bogus = [
        await client.post(CALL, headers=h, json={"name": "prism_introspect", "arguments": {"dimension": "bogus"}}),
        await client.post("/api/mcp/tools/prism_introspect/", headers=h, json={"dimension": "bogus"}),
        await client.post("/api/mcp/tools/prism_introspect/", headers=h, json={"arguments": {"dimension": "bogus"}}),
        await client.post("/api/mcp/tools/prism_introspect/", headers=h, json={"kwargs": {"dimension": "bogus"}}),
        await client.get("/api/v1/dev/introspect/", headers=h, params={"dimension": "bogus"}),
        await client.post("/api/v1/dev/introspect/", headers=h, json={"dimension": "bogus"}),
    ]
    for r in bogus:
        assert r.status_code == 400, r.text
        assert r.json()["error"] == "invalid_arguments"
        assert r.json()["details"]["errors"][0]["field"] == "dimension"
    assert len({r.json()["message"] for r in bogus}) == 1
    # A valid dimension: whatever introspection answers, every door answers the same.
    valid = [
        await client.post(CALL, headers=h, json={"name": "prism_introspect", "arguments": {"dimension": "apps"}}),
        await client.post("/api/mcp/tools/prism_introspect/", headers=h, json={"dimension": "apps"}),
        await client.get("/api/v1/dev/introspect/", headers=h, params={"dimension": "apps"}),
        await client.post("/api/v1/dev/introspect/", headers=h, json={"dimension": "apps"}),
    ]
    assert len({r.status_code for r in valid}) == 1 and valid[0].status_code < 500, [r.text for r in valid]
    canonical = valid[1].json()
    assert canonical["tool_name"] == "prism_introspect"
    if valid[0].is_success:
        assert canonical["success"] is True
        assert valid[0].json() == canonical["data"] == valid[2].json() == valid[3].json()
    else:
        assert canonical["error"] == valid[0].json()["error"] == valid[2].json()["error"]


TRAILING_SLASH_CASES = [
    ("GET", "/api/v1/dev/introspect", None),
    ("POST", "/api/v1/dev/introspect", {"dimension": "mega_tools"}),
    ("POST", "/api/v1/dev/call", {"name": "prism_whoami", "arguments": {}}),
    ("GET", "/api/v1/dev/me", None),
    ("GET", "/api/v1/dev/tools", None),
    ("GET", "/api/v1/dev/ping", None),
    ("POST", "/api/mcp/tools/prism_whoami", {}),
]


@pytest.mark.parametrize(("method", "path", "body"), TRAILING_SLASH_CASES, ids=[f"{m} {p}" for m, p, _ in
                                                                                 TRAILING_SLASH_CASES])
async def test_sandbox_paths_answer_with_and_without_trailing_slash_and_never_redirect(
        client: httpx.AsyncClient, shared: Workspace, method: str, path: str, body: Any) -> None:
    ws = shared
    answers = [await client.request(method, p, headers=ws.headers(), json=body) for p in (path, path + "/")]
    for r in answers:
        assert not r.is_redirect and not 300 <= r.status_code < 400, (r.status_code, r.headers)
        assert "location" not in r.headers
        assert r.status_code not in (404, 405) and r.status_code < 500, r.text
        assert r.headers["content-type"].startswith("application/json")
    assert answers[0].status_code == answers[1].status_code
    one, two = answers[0].json(), answers[1].json()
    if path.endswith(("/call", "/me")):
        assert answers[0].status_code == 200
        one, two = without_last_used(one), without_last_used(two)
    if path.endswith("prism_whoami"):
        assert answers[0].status_code == 200
        one, two = without_last_used(one["data"]), without_last_used(two["data"])
    assert one == two


# --- finance ------------------------------------------------------------------------------------------


async def _vendor(client: httpx.AsyncClient, ws: Workspace, name: str) -> dict[str, Any]:
    return await ok(client, ws, "vendor", "create", {"name": name, "email": f"ap@{name.lower()}.example"},
                    app="finance")


async def _invoice(client: httpx.AsyncClient, ws: Workspace, vendor: dict[str, Any], number: str, cents: int,
                   due: date, *, currency: str = "USD") -> dict[str, Any]:
    return await ok(client, ws, "invoice", "create", {
        "vendor_id": vendor["id"], "number": number, "amount_cents": cents, "currency": currency,
        "issue_date": (due - timedelta(days=30)).isoformat(), "due_date": due.isoformat()}, app="finance")


async def test_invoice_list_read_and_status_transitions(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    acme = await _vendor(client, ws, "Acme")
    late = await _invoice(client, ws, acme, "INV-1", 10_000, date(2024, 1, 10))
    soon = await _invoice(client, ws, acme, "INV-2", 2_500, date(2024, 3, 1))
    assert late["status"] == "received" and late["amount_cents"] == 10_000 and late["due_date"] == "2024-01-10"

    listed = await ok(client, ws, "invoice", "list", {}, app="finance")
    assert listed["total"] == 2 and [i["id"] for i in listed["items"]] == [late["id"], soon["id"]]
    listed = await ok(client, ws, "invoice", "list", {"ordering": "-amount_cents"}, app="finance")
    assert [i["number"] for i in listed["items"]] == ["INV-1", "INV-2"]
    listed = await ok(client, ws, "invoice", "list", {"due_before": "2024-02-01"}, app="finance")
    assert [i["id"] for i in listed["items"]] == [late["id"]]
    assert await ok(client, ws, "invoice", "read", {"id": soon["id"]}, app="finance") == soon

    updated = await ok(client, ws, "invoice", "update", {"id": late["id"], "status": "approved"}, app="finance")
    assert updated["status"] == "approved"
    r = await crud(client, ws, "invoice", "update", {"id": late["id"], "status": "paid"}, app="finance")
    assert r.status_code == 409 and r.json()["error"] == "invalid_transition", r.text  # no payment yet
    await ok(client, ws, "payment", "create", {"invoice_id": late["id"], "paid_on": "2024-02-01"}, app="finance")
    assert (await ok(client, ws, "invoice", "read", {"id": late["id"]}, app="finance"))["status"] == "paid"
    r = await crud(client, ws, "invoice", "update", {"id": late["id"], "status": "received"}, app="finance")
    assert r.status_code == 409 and r.json()["error"] == "invalid_transition", r.text
    r = await crud(client, ws, "invoice", "update", {"id": soon["id"], "status": "paid"}, app="finance")
    assert r.status_code == 409 and r.json()["error"] == "invalid_transition", r.text
    # A refusal raised half-way through an update rolls back what the handler had already changed.
    r = await crud(client, ws, "invoice", "update", {"id": soon["id"], "status": "approved", "memo": "x",
                                                     "due_date": "2020-01-01"}, app="finance")
    assert r.status_code == 400 and r.json()["details"]["errors"][0]["field"] == "due_date", r.text
    assert (await ok(client, ws, "invoice", "read", {"id": soon["id"]}, app="finance"))["status"] == "received"
    assert (await ok(client, ws, "invoice", "read", {"id": late["id"]}, app="finance"))["status"] == "paid"
    listed = await ok(client, ws, "invoice", "list", {"status": "paid"}, app="finance")
    assert [i["id"] for i in listed["items"]] == [late["id"]]
    refused = [e for e in await ledger(db, ws.org.id) if e.outcome == "refused"]
    assert [(e.coordinate, e.error_code, e.detail["status"]) for e in refused] == [
        ("entity_crud/finance/invoice/update", "invalid_transition", 409)] * 3 + [
        ("entity_crud/finance/invoice/update", "invalid_arguments", 400)]


async def test_vendor_list_search_and_ordering(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for name in ("Zenith", "Acme", "Bolt"):
        await _vendor(client, ws, name)
    listed = await ok(client, ws, "vendor", "list", {}, app="finance")
    assert listed["total"] == 3 and [v["name"] for v in listed["items"]] == ["Acme", "Bolt", "Zenith"]
    listed = await ok(client, ws, "vendor", "list", {"search": "ZEN"}, app="finance")
    assert [v["name"] for v in listed["items"]] == ["Zenith"]
    listed = await ok(client, ws, "vendor", "list", {"ordering": "-name", "page_size": 1, "page": 2}, app="finance")
    assert listed["items"][0]["name"] == "Bolt" and listed["total"] == 3 and listed["page_size"] == 1


async def test_ap_aging_puts_each_outstanding_invoice_in_its_bucket(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    as_of = date(2024, 6, 30)
    acme, zeta = await _vendor(client, ws, "Acme"), await _vendor(client, ws, "Zeta")
    days_past_due = {  # invoice number: (days past due on as_of, amount)
        "C1": (-5, 1), "C2": (0, 2), "A1": (1, 4), "A2": (30, 8), "B1": (31, 16), "B2": (60, 32),
        "D1": (61, 64), "D2": (90, 128), "E1": (91, 256), "E2": (400, 512)}
    for number, (days, cents) in days_past_due.items():
        await _invoice(client, ws, acme, number, cents, as_of - timedelta(days=days))
    eur = await _invoice(client, ws, zeta, "Z1", 1_000, as_of - timedelta(days=45), currency="EUR")
    paid = await _invoice(client, ws, zeta, "Z2", 7_777, as_of - timedelta(days=10))
    void = await _invoice(client, ws, zeta, "Z3", 9_999, as_of - timedelta(days=10))
    disputed = await _invoice(client, ws, zeta, "Z4", 2_048, as_of - timedelta(days=10))
    await ok(client, ws, "invoice", "update", {"id": paid["id"], "status": "approved"}, app="finance")
    for invoice, action in ((void, "void"), (disputed, "dispute")):  # the actions that record a reason
        r = await client.post(f"/prism/workflow_action/finance/invoice/{action}", headers=ws.headers(),
                              json={"id": invoice["id"], "reason": "aging test"})
        assert r.status_code == 200, r.text
    # Paid in full: the payment moves it to paid.
    await ok(client, ws, "payment", "create", {"invoice_id": paid["id"], "paid_on": as_of.isoformat()},
             app="finance")

    r = await client.post("/prism/report_query/finance/invoice/agingApSummary", headers=ws.headers(),
                          json={"as_of": as_of.isoformat()})
    assert r.status_code == 200, r.text
    report = r.json()["data"]
    assert report["as_of"] == "2024-06-30" and report["amounts_in"] == "cents"
    assert report["buckets"] == ["current", "days_1_30", "days_31_60", "days_61_90", "days_over_90"]
    assert report["invoice_count"] == 12  # paid and void invoices are not outstanding
    usd = {"currency": "USD", "current": 1 + 2, "days_1_30": 4 + 8 + 2_048, "days_31_60": 16 + 32,
           "days_61_90": 64 + 128, "days_over_90": 256 + 512, "total": 1023 + 2_048}
    eur_totals = {"currency": "EUR", "current": 0, "days_1_30": 0, "days_31_60": 1_000, "days_61_90": 0,
                  "days_over_90": 0, "total": 1_000}
    assert report["by_currency"] == [eur_totals, usd]
    acme_row = {"vendor_id": acme["id"], "vendor_name": "Acme", **usd, "days_1_30": 12, "total": 1023}
    zeta_usd = {"vendor_id": zeta["id"], "vendor_name": "Zeta", "currency": "USD", "current": 0,
                "days_1_30": 2_048, "days_31_60": 0, "days_61_90": 0, "days_over_90": 0, "total": 2_048}
    zeta_eur = {"vendor_id": zeta["id"], "vendor_name": "Zeta", **eur_totals}
    assert report["by_vendor"] == [zeta_usd, acme_row, zeta_eur]

    r = await client.post("/api/mcp/tools/prism_report_query/", headers=ws.headers(), json={
        "app": "finance", "entity": "invoice", "operation": "agingApSummary",
        "arguments": {"as_of": as_of.isoformat(), "vendor_id": zeta["id"]}})
    only_zeta = r.json()["data"]
    assert only_zeta["invoice_count"] == 2 and only_zeta["by_vendor"] == [zeta_usd, zeta_eur]
    assert eur["currency"] == "EUR"
    r = await client.post("/prism/report_query/finance/invoice/agingApSummary", headers=ws.headers(),
                          json={"as_of": "2024-02-30"})
    assert r.status_code == 400 and r.json()["details"]["errors"][0]["field"] == "as_of"


# --- spare_parts --------------------------------------------------------------------------------------


async def test_spare_part_create_read_update_delete(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    part = await ok(client, ws, "spare_part", "create", {"sku": "V-100", "name": "Valve", "quantity": 3,
                                                         "reorder_level": 5, "unit_cost_cents": 1250,
                                                         "location": "Bin 7"})
    assert {k: part[k] for k in ("sku", "name", "description", "quantity", "reorder_level", "unit_cost_cents",
                                 "location", "status")} == {
        "sku": "V-100", "name": "Valve", "description": "", "quantity": 3, "reorder_level": 5,
        "unit_cost_cents": 1250, "location": "Bin 7", "status": "active"}
    assert "organization_id" not in part and uuid.UUID(part["id"])
    assert await ok(client, ws, "spare_part", "read", {"id": part["id"]}) == part

    r = await crud(client, ws, "spare_part", "create", {"sku": "V-100", "name": "Another valve"})
    assert r.status_code == 409 and r.json()["error"] == "conflict", r.text

    updated = await ok(client, ws, "spare_part", "update", {"id": part["id"], "reorder_level": 0,
                                                            "status": "discontinued"})
    assert updated["reorder_level"] == 0 and updated["status"] == "discontinued" and updated["location"] == "Bin 7"
    assert await ok(client, ws, "spare_part", "read", {"id": part["id"]}) == updated

    assert await ok(client, ws, "spare_part", "delete", {"id": part["id"]}) == {"id": part["id"], "deleted": True}
    for operation in ("read", "update", "delete"):
        r = await crud(client, ws, "spare_part", operation, {"id": part["id"]})
        assert r.status_code == 404 and r.json()["error"] == "not_found", r.text
    assert (await ok(client, ws, "spare_part", "list", {}))["total"] == 0


async def _stock(client: httpx.AsyncClient, ws: Workspace) -> dict[str, dict[str, Any]]:
    parts = [
        {"sku": "A-1", "name": "Air filter", "quantity": 2, "reorder_level": 5, "unit_cost_cents": 900,
         "location": "Shelf A"},
        {"sku": "B-1", "name": "Belt drive", "quantity": 5, "reorder_level": 5, "unit_cost_cents": 300,
         "location": "Shelf B"},
        {"sku": "C-1", "name": "Coupling", "quantity": 50, "reorder_level": 5, "unit_cost_cents": 100,
         "location": "Shelf A", "description": "fits the BELT housing"},
        {"sku": "D_1", "name": "Gasket 50% off", "quantity": 6, "reorder_level": 5, "unit_cost_cents": 700,
         "location": "Shelf B", "status": "discontinued"},
        {"sku": "E-1", "name": "Encoder", "quantity": 0, "reorder_level": 0, "unit_cost_cents": 5000,
         "location": "Cage"},
    ]
    return {p["sku"]: await ok(client, ws, "spare_part", "create", p) for p in parts}


@pytest.fixture(scope="module")
async def stocked(app: Any, db: Database) -> tuple[Workspace, dict[str, dict[str, Any]]]:
    """A workspace holding exactly the five parts of `_stock`; the tests using it only read."""
    ws = await Factory(db).workspace(roles=("owner",))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
        return ws, await _stock(client, ws)


async def test_spare_part_list_filters_and_search(
        client: httpx.AsyncClient, stocked: tuple[Workspace, dict[str, Any]]) -> None:
    ws = stocked[0]

    async def skus(**arguments: Any) -> list[str]:
        data = await ok(client, ws, "spare_part", "list", {**arguments, "ordering": "sku"})
        assert data["total"] == len(data["items"])
        return [p["sku"] for p in data["items"]]

    assert await skus() == ["A-1", "B-1", "C-1", "D_1", "E-1"]
    assert await skus(status="discontinued") == ["D_1"]
    assert await skus(status="active") == ["A-1", "B-1", "C-1", "E-1"]
    assert await skus(location="Shelf A") == ["A-1", "C-1"]
    assert await skus(below_reorder_level=True) == ["A-1", "B-1", "E-1"]  # at the level counts as low
    assert await skus(below_reorder_level=False) == ["C-1", "D_1"]
    assert await skus(location="Shelf B", below_reorder_level=True, status="active") == ["B-1"]
    assert await skus(search="BELT") == ["B-1", "C-1"]  # name or description, any case
    assert await skus(search="d_1") == ["D_1"]  # sku
    assert await skus(search="%") == ["D_1"]  # LIKE wildcards are matched literally
    assert await skus(search="_") == ["D_1"]
    assert await skus(search="no such part") == []
    r = await crud(client, ws, "spare_part", "list", {"status": "lost"})
    assert r.status_code == 400 and r.json()["details"]["errors"][0]["field"] == "status"


async def test_spare_part_list_ordering(client: httpx.AsyncClient, stocked: tuple[Workspace, dict[str, Any]]) -> None:
    ws = stocked[0]

    async def names(ordering: str | None) -> list[str]:
        arguments = {} if ordering is None else {"ordering": ordering}
        return [p["sku"] for p in (await ok(client, ws, "spare_part", "list", arguments))["items"]]

    assert await names(None) == ["A-1", "B-1", "C-1", "E-1", "D_1"]  # by name
    assert await names("-quantity") == ["C-1", "D_1", "B-1", "A-1", "E-1"]
    assert await names("unit_cost_cents") == ["C-1", "B-1", "D_1", "A-1", "E-1"]
    assert await names("-sku") == ["E-1", "D_1", "C-1", "B-1", "A-1"]
    for bad in ("colour", "description", "organization_id", "-", "--sku", "---quantity", "name;drop table spare_parts"):
        r = await crud(client, ws, "spare_part", "list", {"ordering": bad})
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["error"] == "invalid_arguments" and body["message"].startswith("ordering")
        assert body["details"]["errors"][0]["field"] == "ordering"


async def test_spare_part_list_paging(client: httpx.AsyncClient, stocked: tuple[Workspace, dict[str, Any]]) -> None:
    ws, stock = stocked
    pages = [await ok(client, ws, "spare_part", "list", {"page": n, "page_size": 2, "ordering": "sku"})
             for n in (1, 2, 3, 4)]
    assert [[p["sku"] for p in page["items"]] for page in pages] == [["A-1", "B-1"], ["C-1", "D_1"], ["E-1"], []]
    assert [(p["page"], p["page_size"], p["total"]) for p in pages] == [(n, 2, 5) for n in (1, 2, 3, 4)]
    assert pages[0]["items"][0] == stock["A-1"]
    default = await ok(client, ws, "spare_part", "list", {})
    assert (default["page"], default["page_size"], default["total"], len(default["items"])) == (1, 20, 5, 5)
    assert (await ok(client, ws, "spare_part", "list", {"page_size": 100}))["page_size"] == 100
    for arguments, field in (({"page_size": 101}, "page_size"), ({"page_size": 0}, "page_size"),
                             ({"page": 0}, "page"), ({"page": "two"}, "page")):
        r = await crud(client, ws, "spare_part", "list", arguments)
        assert r.status_code == 400, r.text
        assert r.json()["details"]["errors"][0]["field"] == field
        assert r.json()["message"].startswith(field)


# --- the webhook event registry -----------------------------------------------------------------------

SPEC_EVENT_TYPES = {
    "governance.decision.block", "governance.decision.allow", "governance.violation.detected",
    "governance.oversight.requested", "document.uploaded", "document.processed", "agent.completed",
    "agent.failed", "mission.started", "mission.completed", "mission.budget_exceeded", "audit.entry_created",
    "claim.submitted", "invoice.received", "ticket.created",
}
# Beyond SPEC's fifteen: the ledger's signed checkpoints, for receivers to keep as proof (docs/audit.md).
PRISM_EVENT_TYPES = {"audit.checkpoint"}


async def test_webhook_event_list_returns_specs_fifteen_event_types_and_the_ledger_checkpoint(
        client: httpx.AsyncClient, shared: Workspace) -> None:
    ws = shared
    data = await ok(client, ws, "webhook_event", "list", {}, app="core", label="viewer")
    types = [e["event_type"] for e in data["items"]]
    assert len(types) == 16 and set(types) == SPEC_EVENT_TYPES | PRISM_EVENT_TYPES
    assert data["total"] == 16
    assert {e["api_version"] for e in data["items"]} == {"2024-12-31"}
    prefixes = {e["event_type"]: e["event_id_prefix"] for e in data["items"]}
    assert prefixes["governance.decision.block"] == prefixes["governance.decision.allow"] == "dec_"
    assert prefixes["governance.violation.detected"] == "vio_"
    assert prefixes["governance.oversight.requested"] == "ovr_"
    governance = await ok(client, ws, "webhook_event", "list", {"group": "governance"}, app="core", label="viewer")
    assert {e["event_type"] for e in governance["items"]} == {t for t in SPEC_EVENT_TYPES if
                                                             t.startswith("governance.")}
    platform = await through(client, "prism_path", ws.headers("viewer"), "entity_crud", "core", "webhook_event",
                             "list", {"group": "platform"})
    assert platform[0] == 200 and platform[1]["total"] == 12
