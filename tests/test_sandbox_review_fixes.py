"""The sandbox's refusals, read the same way whatever the endpoint: a 409 or 202 the call answers as 400 lists its
problems in `details.errors` like every 400 and keeps what it said; and one rule for parameters (docs/architecture.md
"Parameters"): one the endpoint does not take is refused naming it, one it takes sent blank is as if not sent."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import governed_key

CALL = "/api/v1/dev/call/"
TOOLS = "/api/v1/dev/tools/"
INTROSPECT = "/api/v1/dev/introspect/"
ME = "/api/v1/dev/me/"


def _crud(app: str, entity: str, operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": "prism_entity_crud", "arguments": {"app": app, "entity": entity, "operation": operation,
                                                       "arguments": arguments}}


def _refused_naming(answer: httpx.Response, *fields: str) -> None:
    body = answer.json()
    assert answer.status_code == 400 and body["error"] == "invalid_arguments", answer.text
    assert [problem["field"] for problem in body["details"]["errors"]] == list(fields), body


# --- a 409 or 202 answered as 400 -------------------------------------------------------------------------

async def test_a_conflict_on_the_sandbox_call_is_a_400_listing_its_problem(client: httpx.AsyncClient,
                                                                            factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    sku = "SKU-" + uuid.uuid4().hex[:8]
    first = await client.post(CALL, headers=ws.headers(), json=_crud("spare_parts", "spare_part", "create",
                                                                     {"sku": sku, "name": "a"}))
    assert first.status_code == 200, first.text
    again = await client.post(CALL, headers=ws.headers(), json=_crud("spare_parts", "spare_part", "create",
                                                                     {"sku": sku, "name": "b"}))
    body = again.json()
    assert again.status_code == 400 and body["error"] == "conflict", again.text
    assert body["tool_name"] == "prism_entity_crud"
    [problem] = body["details"]["errors"]
    assert set(problem) == {"field", "message"} and problem["message"], body
    assert problem["message"] in body["message"]


async def test_an_oversight_hold_on_the_sandbox_call_is_a_400_that_keeps_its_request(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={
        "name": "gated", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"]})
    arguments = {"name": "Acme " + uuid.uuid4().hex[:6]}
    held = await client.post(CALL, headers=ws.headers("agent"), json=_crud("finance", "vendor", "create", arguments))
    body = held.json()
    assert held.status_code == 400 and body["error"] == "oversight_required", held.text
    details = body["details"]
    assert details["errors"] == [{"field": "arguments", "message": body["message"]}], details
    assert details["status"] == "pending" and details["oversight_request_id"], details
    # The same hold on the canonical door: its own 202, with the same request and no `errors`.
    canonical = await client.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers("agent"),
                                  json=_crud("finance", "vendor", "create", {"name": "Other"})["arguments"])
    assert canonical.status_code == 202 and "errors" not in canonical.json()["details"], canonical.text


async def test_an_idempotency_key_refusal_keeps_its_409_and_its_details(client: httpx.AsyncClient,
                                                                         factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    keyed = {**ws.headers(), "Idempotency-Key": uuid.uuid4().hex}
    first = await client.post(CALL, headers=keyed, json={"name": "prism_whoami", "arguments": {}})
    assert first.status_code == 200, first.text
    reused = await client.post(CALL, headers=keyed, json={"name": "prism_introspect", "arguments": {}})
    assert reused.status_code == 409 and reused.json()["error"] == "idempotency_key_reused", reused.text


# --- unknown parameters are refused -----------------------------------------------------------------------

@pytest.mark.parametrize(("path", "query", "fields"), [
    (TOOLS, "categroy=utility", ["categroy"]),
    (TOOLS, "serach=", ["serach"]),  # a blank misspelt filter is still a misspelt filter
    (TOOLS, "search=who&limit=5&x=1", ["limit", "x"]),
    (INTROSPECT, "dimenson=apps", ["dimenson"]),
    (INTROSPECT, "dimension=handlers&pagesize=", ["pagesize"]),
    (ME, "verbose=true", ["verbose"]),
    (ME, "x=", ["x"]),
])
async def test_a_query_parameter_the_endpoint_does_not_take_is_refused_naming_it(
        client: httpx.AsyncClient, factory: Factory, path: str, query: str, fields: list[str]) -> None:
    ws = await factory.workspace(roles=("owner",))
    _refused_naming(await client.get(f"{path}?{query}", headers=ws.headers()), *fields)


async def test_a_stranger_learns_nothing_of_the_parameters(client: httpx.AsyncClient) -> None:
    for path in (f"{TOOLS}?categroy=x", f"{ME}?x=1"):
        answer = await client.get(path)
        assert answer.status_code == 401 and answer.json()["error"] == "authentication_required", answer.text


async def test_a_top_level_key_the_call_does_not_take_is_refused_naming_it(client: httpx.AsyncClient,
                                                                             factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    misspelt = await client.post(CALL, headers=ws.headers(),
                                 json={"name": "prism_introspect", "argumnts": {"dimension": "stats"}, "mode": 1})
    _refused_naming(misspelt, "argumnts", "mode")
    assert misspelt.json()["tool_name"] == "prism_introspect"
    # The envelope's own keys belong inside `arguments`, as the canonical door takes them.
    beside = await client.post(CALL, headers=ws.headers(), json={
        "name": "prism_entity_crud", "app": "spare_parts", "entity": "spare_part", "operation": "list"})
    _refused_naming(beside, "app", "entity", "operation")
    fine = await client.post(CALL, headers=ws.headers(), json={"name": "prism_introspect",
                                                               "arguments": {"dimension": "stats"}})
    assert fine.status_code == 200, fine.text


# --- a parameter sent blank is as if not sent -------------------------------------------------------------

async def test_a_blank_parameter_is_read_as_absent_by_tools_and_introspect_alike(client: httpx.AsyncClient,
                                                                                 factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    whole = (await client.get(TOOLS, headers=ws.headers())).json()
    blank = await client.get(f"{TOOLS}?category=&search=%20&page=&page_size=", headers=ws.headers())
    assert blank.status_code == 200 and blank.json() == whole, blank.text
    handlers = (await client.get(f"{INTROSPECT}?dimension=handlers", headers=ws.headers())).json()
    blank = await client.get(f"{INTROSPECT}?dimension=handlers&page=&page_size=&app=&rerank=", headers=ws.headers())
    assert blank.status_code == 200 and blank.json() == handlers, blank.text
    default = (await client.get(INTROSPECT, headers=ws.headers())).json()
    assert (await client.get(f"{INTROSPECT}?dimension=", headers=ws.headers())).json() == default
