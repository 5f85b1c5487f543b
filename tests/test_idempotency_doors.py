"""Idempotency keys on every door that dispatches: a repeat replays the first answer and runs nothing; another
request with the key is 409; keys belong to one credential; a handler's refusals replay too, while the checks'
refusals leave the key unused; the ledger marks replays.

Doors: canonical (`POST /api/mcp/tools/<tool>/`), the coordinate path (`POST /prism/...`), the sandbox call
(`POST /api/v1/dev/call/`) and MCP `tools/call` (key in `params._meta.idempotencyKey`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select, update

from prism.apps.spare_parts.models import SparePart
from prism.idempotency.models import IdempotencyRecord
from prism.models.audit import AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.ledger_support import seal_waiting, verified
from tests.oauth_support import OAUTH, bearer, browser, tokens_for
from tests.test_mcp_protocol import PATH as MCP_PATH
from tests.test_mcp_protocol import headers_for, initialize, rpc

DOORS = ("canonical", "prism_path", "sandbox", "mcp")
REPLAYED = "idempotent-replayed"


def new_key() -> str:
    return f"key-{uuid.uuid4()}"


def part(sku: str, **more: Any) -> dict[str, Any]:
    return {"sku": sku, "name": f"part {sku}", **more}


async def send(client: httpx.AsyncClient, door: str, ws: Workspace, arguments: dict[str, Any], key: str | None, *,
               label: str = "owner", operation: str = "create") -> httpx.Response:
    """One spare-part call through `door`, with `key` as that door takes it."""
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": operation, "arguments": arguments}
    headers = ws.headers(label) if key is None else {**ws.headers(label), "Idempotency-Key": key}
    if door == "canonical":
        return await client.post("/api/mcp/tools/prism_entity_crud/", headers=headers, json=envelope)
    if door == "prism_path":
        return await client.post(f"/prism/entity_crud/spare_parts/spare_part/{operation}", headers=headers,
                                 json=arguments)
    if door == "sandbox":
        return await client.post("/api/v1/dev/call/", headers=headers,
                                 json={"name": "prism_entity_crud", "arguments": envelope})
    mcp_headers = headers_for(ws, label)
    session = await initialize(client, mcp_headers)
    params: dict[str, Any] = {"name": "prism_entity_crud", "arguments": envelope}
    if key is not None:
        params["_meta"] = {"idempotencyKey": key}
    return await client.post(MCP_PATH, headers={**mcp_headers, "Mcp-Session-Id": session},
                             json=rpc("tools/call", params))


def answer_of(door: str, response: httpx.Response) -> tuple[int, Any, bool]:
    """(status, body, replayed) as the door answered: for MCP the tool result without its `_meta`."""
    if door != "mcp":
        return response.status_code, response.json(), response.headers.get(REPLAYED) == "true"
    result = dict(response.json()["result"])
    meta = result.pop("_meta", {})
    return response.status_code, result, meta.get("idempotentReplayed") is True


def error_code(door: str, response: httpx.Response) -> str:
    if door == "mcp":
        result = response.json()["result"]
        assert result["isError"] is True, result
        code: str = json.loads(result["content"][0]["text"])["error"]
        return code
    return str(response.json()["error"])


async def parts_with_sku(db: Database, ws: Workspace, sku: str) -> int:
    async with db.read() as s:
        rows = await s.execute(select(SparePart.id).where(SparePart.organization_id == ws.org.id,
                                                          SparePart.sku == sku))
        return len(rows.all())


async def entries(db: Database, ws: Workspace) -> list[AuditEntry]:
    await seal_waiting(db, ws.org.id)
    async with db.read() as s:
        rows = await s.execute(select(AuditEntry).where(AuditEntry.organization_id == ws.org.id)
                               .order_by(AuditEntry.seq))
        return list(rows.scalars())


@pytest.mark.parametrize("door", DOORS)
async def test_a_repeat_replays_the_first_answer_and_creates_one_record(
        client: httpx.AsyncClient, factory: Factory, db: Database, door: str) -> None:
    ws = await factory.workspace()
    key = new_key()
    first = answer_of(door, await send(client, door, ws, part("ONE-1"), key))
    again = answer_of(door, await send(client, door, ws, part("ONE-1"), key))
    assert first[0] == 200 and first[2] is False, first
    assert again == (first[0], first[1], True)
    assert await parts_with_sku(db, ws, "ONE-1") == 1


@pytest.mark.parametrize("door", ("canonical", "prism_path", "sandbox"))
async def test_a_header_key_is_the_same_key_with_whitespace_around_it(
        client: httpx.AsyncClient, factory: Factory, db: Database, door: str) -> None:
    """A field value does not include the whitespace around it (RFC 9110): a retry that sends "k" after "k " (or
    the other way round) is the same request, not a second run."""
    ws = await factory.workspace()
    key = new_key()
    first = answer_of(door, await send(client, door, ws, part("WS-1"), key + " "))
    again = answer_of(door, await send(client, door, ws, part("WS-1"), key))
    assert first[0] == 200 and again == (first[0], first[1], True)
    assert await parts_with_sku(db, ws, "WS-1") == 1


@pytest.mark.parametrize("door", DOORS)
async def test_the_same_key_with_another_body_is_409_idempotency_key_reused(
        client: httpx.AsyncClient, factory: Factory, db: Database, door: str) -> None:
    ws = await factory.workspace()
    key = new_key()
    assert answer_of(door, await send(client, door, ws, part("TWO-1"), key))[0] == 200
    other = await send(client, door, ws, part("TWO-2"), key)
    assert error_code(door, other) == "idempotency_key_reused"
    assert other.status_code == (200 if door == "mcp" else 409)
    assert await parts_with_sku(db, ws, "TWO-2") == 0


async def test_the_same_key_on_another_door_is_another_request(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    key = new_key()
    assert (await send(client, "canonical", ws, part("DOOR-1"), key)).status_code == 200
    other = await send(client, "sandbox", ws, part("DOOR-1"), key)
    assert other.status_code == 409 and other.json()["error"] == "idempotency_key_reused"
    assert other.json()["tool_name"] == "prism_entity_crud"  # the sandbox call's own shape


async def test_ten_concurrent_repeats_run_the_handler_once(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    key = new_key()
    answers = await asyncio.gather(*(send(client, "canonical", ws, part("MANY-1"), key) for _ in range(10)))
    assert {a.status_code for a in answers} == {200}
    assert len({a.content for a in answers}) == 1
    assert [a.headers.get(REPLAYED) for a in answers].count(None) == 1
    assert await parts_with_sku(db, ws, "MANY-1") == 1


async def test_another_credential_with_the_same_key_makes_its_own_call(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    await factory.add_key(ws, "second", role="owner")
    key = new_key()
    first = await send(client, "canonical", ws, part("CRED-1"), key)
    second = await send(client, "canonical", ws, part("CRED-1"), key, label="second")
    assert first.status_code == 200, first.text
    # The part exists already: the second credential's own call runs and is refused by the unique sku.
    assert second.status_code == 409 and second.json()["error"] == "conflict", second.text
    assert REPLAYED not in second.headers
    third = await send(client, "canonical", ws, part("CRED-2"), key, label="second")
    assert third.status_code == 409 and third.json()["error"] == "idempotency_key_reused"


async def test_another_tenants_credential_with_the_same_key_makes_its_own_call(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ours, theirs = await factory.workspace(), await factory.workspace()
    key = new_key()
    mine = await send(client, "canonical", ours, part("TEN-1"), key)
    other = await send(client, "canonical", theirs, part("TEN-1"), key)
    assert mine.status_code == other.status_code == 200
    assert REPLAYED not in other.headers
    assert other.json()["data"]["id"] != mine.json()["data"]["id"]
    assert await parts_with_sku(db, ours, "TEN-1") == await parts_with_sku(db, theirs, "TEN-1") == 1


@pytest.mark.parametrize("door", DOORS)
async def test_a_refusal_of_the_handler_replays_and_one_of_the_checks_leaves_the_key_unused(
        client: httpx.AsyncClient, factory: Factory, db: Database, door: str) -> None:
    """The handler's refusal is the call's outcome and replays; a refusal before the call was admitted (a role
    without the permission, invalid arguments) ran nothing: its repeat is checked again, and the key stays free
    for the request as it should have been."""
    ws = await factory.workspace()
    missing_key = new_key()
    missing = answer_of(door, await send(client, door, ws, {"id": "nope"}, missing_key, operation="read"))
    again = answer_of(door, await send(client, door, ws, {"id": "nope"}, missing_key, operation="read"))
    assert again == (missing[0], missing[1], True)
    key = new_key()
    denied = answer_of(door, await send(client, door, ws, part("NOPE-1"), key, label="viewer"))
    assert answer_of(door, await send(client, door, ws, part("NOPE-1"), key, label="viewer")) == (*denied[:2], False)
    invalid_key = new_key()
    invalid = answer_of(door, await send(client, door, ws, {"sku": "X"}, invalid_key))  # no name
    assert answer_of(door, await send(client, door, ws, {"sku": "X"}, invalid_key)) == (*invalid[:2], False)
    corrected = answer_of(door, await send(client, door, ws, part("X"), invalid_key))
    assert corrected[0] == 200 and corrected[2] is False and await parts_with_sku(db, ws, "X") == 1
    if door != "mcp":
        assert (missing[0], missing[1]["error"]) == (404, "not_found")
        assert (denied[0], denied[1]["error"]) == (403, "permission_denied")
        assert (invalid[0], invalid[1]["error"]) == (400, "invalid_arguments")
    outcomes = [(e.outcome, e.error_code, e.detail["status"]) for e in await entries(db, ws)]
    assert outcomes == [("refused", "not_found", 404), ("replayed", "not_found", 404),
                        ("refused", "permission_denied", 403), ("refused", "permission_denied", 403),
                        ("refused", "invalid_arguments", 400), ("refused", "invalid_arguments", 400),
                        ("allowed", None, 200)]


async def test_the_ledger_records_one_run_and_marks_each_replay(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    key = new_key()
    for _ in range(3):
        assert (await send(client, "canonical", ws, part("AUD-1"), key)).status_code == 200
    ledger = await entries(db, ws)
    assert [e.outcome for e in ledger] == ["allowed", "replayed", "replayed"]
    assert len({e.detail["idempotency_key"] for e in ledger}) == 1
    assert [(e.detail["status"], e.detail["cost"]) for e in ledger[1:]] == [(200, 0), (200, 0)]
    assert len({e.arguments_digest for e in ledger}) == 1
    assert (await verified(db, ws.org.id)).valid


async def test_an_expired_key_runs_the_call_again_and_expired_keys_are_purged(
        client: httpx.AsyncClient, factory: Factory, db: Database, app: Any) -> None:
    ws = await factory.workspace()
    key = new_key()
    assert (await send(client, "canonical", ws, part("OLD-1", quantity=1), key)).status_code == 200
    # Time travel: the key's 24 hours are over.
    async with db.write() as s:
        await s.execute(update(IdempotencyRecord).values(expires_at=IdempotencyRecord.created_at))
    again = await send(client, "canonical", ws, part("OLD-1", quantity=1), key)
    assert again.status_code == 409 and again.json()["error"] == "conflict"  # it ran: the sku exists
    assert REPLAYED not in again.headers
    async with db.write() as s:
        await s.execute(update(IdempotencyRecord).values(expires_at=IdempotencyRecord.created_at))
    assert await app.state.dispatcher.idempotency.purge_expired() >= 1
    async with db.read() as s:
        assert (await s.execute(select(IdempotencyRecord.id))).first() is None


@pytest.mark.parametrize("value", [b"", b"x" * 256, b"caf\xe9", b"tab\there"])
@pytest.mark.parametrize("door", ("canonical", "prism_path", "sandbox"))
async def test_an_unusable_key_header_is_400_naming_it_in_the_doors_shape(
        client: httpx.AsyncClient, factory: Factory, db: Database, door: str, value: bytes) -> None:
    ws = await factory.workspace()
    headers = [(k.encode(), v.encode()) for k, v in ws.headers().items()] + [(b"Idempotency-Key", value)]
    path = {"canonical": "/api/mcp/tools/prism_entity_crud/", "sandbox": "/api/v1/dev/call/",
            "prism_path": "/prism/entity_crud/spare_parts/spare_part/create"}[door]
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": part("BAD-1")}
    body = {"canonical": envelope, "sandbox": {"name": "prism_entity_crud", "arguments": envelope},
            "prism_path": part("BAD-1")}[door]
    answer = await client.post(path, headers=httpx.Headers(headers), json=body)
    assert answer.status_code == 400, answer.text
    refusal = answer.json()
    assert refusal["error"] == "invalid_idempotency_key" and [
        p["field"] for p in refusal["details"]["errors"]] == ["Idempotency-Key"]
    assert "Idempotency-Key" in refusal["message"] and refusal["tool_name"] == "prism_entity_crud"
    assert await parts_with_sku(db, ws, "BAD-1") == 0 and await entries(db, ws) == []


@pytest.mark.parametrize("value", ["", "x" * 256, "caf\u00e9", 42])
async def test_an_unusable_mcp_key_is_invalid_params_naming_it(
        client: httpx.AsyncClient, factory: Factory, db: Database, value: Any) -> None:
    ws = await factory.workspace()
    mcp_headers = headers_for(ws)
    session = await initialize(client, mcp_headers)
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": part("BAD-2")}
    answer = await client.post(MCP_PATH, headers={**mcp_headers, "Mcp-Session-Id": session}, json=rpc(
        "tools/call", {"name": "prism_entity_crud", "arguments": envelope, "_meta": {"idempotencyKey": value}}))
    error = answer.json()["error"]
    assert error["code"] == -32602 and "_meta.idempotencyKey" in error["message"], error
    assert error["data"]["error"] == "invalid_idempotency_key"
    assert [p["field"] for p in error["data"]["errors"]] == ["_meta.idempotencyKey"]
    assert await parts_with_sku(db, ws, "BAD-2") == 0


async def test_a_call_without_a_key_never_touches_the_idempotency_table(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    engines = {db.engine.sync_engine, db.read_engine.sync_engine}
    for engine in engines:
        event.listen(engine, "before_cursor_execute", seen)
    try:
        for door in DOORS:
            answer = await send(client, door, ws, part(f"FREE-{door}"), None)
            assert answer.status_code == 200 and REPLAYED not in answer.headers
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", seen)
    assert statements and not [s for s in statements if "idempotency" in s]


async def test_a_stored_answer_is_sealed(client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    key = new_key()
    created = await send(client, "canonical", ws, part("SEALED-1", description="not for the database's eyes"), key)
    assert created.status_code == 200
    async with db.read() as s:
        rows = (await s.execute(select(IdempotencyRecord.id, IdempotencyRecord.answer))).all()
    stored = [base64.b64decode(answer or "") for _, answer in rows]
    assert stored and not [a for a in stored if b"SEALED-1" in a or b"database's eyes" in a]
    assert not [row_id for row_id, _ in rows if key in row_id]  # the key is stored as part of a digest only


async def _refreshed(c: httpx.AsyncClient, tokens: dict[str, Any], scope: str) -> dict[str, Any]:
    """A token of the same grant (the same credential) for `scope`, through a refresh."""
    client = tokens["client"]
    form = {"grant_type": "refresh_token", "client_id": client["client_id"], "refresh_token": tokens["refresh_token"],
            "scope": scope, **({"client_secret": client["client_secret"]} if "client_secret" in client else {})}
    answer = await c.post(f"{OAUTH}/token/", data=form)
    assert answer.status_code == 200 and answer.json()["scope"] == scope, answer.text
    return {**tokens, **answer.json()}


async def test_a_scope_refusal_is_not_kept_so_the_same_grant_with_the_scope_runs_the_call(
        app: object, factory: Factory, db: Database) -> None:
    """A token refused for a scope its grant holds (a client that narrowed its token) steps up by refreshing
    with the scope: the retry under the same key, by the same credential, runs the call (it was answered with
    the stored 403 for 24 hours)."""
    ws = await factory.workspace(roles=("owner",))
    key = new_key()
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": part("STEP-1")}
    async with browser(app, ws.host) as c:
        granted = await tokens_for(c, ws, scope="mcp:read mcp:write")
        narrow = await _refreshed(c, granted, "mcp:read")

        async def create(tokens: dict[str, Any]) -> httpx.Response:
            return await c.post("/api/mcp/tools/prism_entity_crud/", json=envelope,
                                headers={**bearer(tokens["access_token"]), "Idempotency-Key": key})

        refused = await create(narrow)
        assert refused.status_code == 403 and refused.json()["error"] == "permission_denied", refused.text
        assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]  # ask for mcp:write
        stepped_up = await _refreshed(c, narrow, "mcp:read mcp:write")
        ran = await create(stepped_up)
        assert ran.status_code == 200 and REPLAYED not in ran.headers, ran.text
        replayed = await create(stepped_up)
        assert replayed.status_code == 200 and replayed.headers[REPLAYED] == "true", replayed.text
        assert replayed.json()["data"]["id"] == ran.json()["data"]["id"]
        assert (await create(narrow)).headers.get(REPLAYED) == "true"  # the key's answer now, whoever of the grant
    assert await parts_with_sku(db, ws, "STEP-1") == 1
    outcomes = [(e.outcome, e.error_code) for e in await entries(db, ws)]
    assert outcomes == [("refused", "permission_denied"), ("allowed", None), ("replayed", None), ("replayed", None)]
