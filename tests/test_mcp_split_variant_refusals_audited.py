"""An operation called through a split-surface variant of another kind is refused by the dispatcher: after the
permission check (a caller that may not call the operation learns nothing of its kind), with a ledger entry and,
for a credential tied to an AI system, a governance decision, as every refusal has."""

from __future__ import annotations

import json
from typing import Any

import httpx

from prism.models import AuditEntry
from tests.factories import Factory, Workspace
from tests.governance_support import entries, governed_key, ok
from tests.test_mcp_protocol import PATH, headers_for, initialize, rpc

CREATE = {"app": "spare_parts", "entity": "spare_part", "operation": "create",
          "arguments": {"sku": "VARIANT-1", "name": "Variant"}}


async def _call(client: httpx.AsyncClient, ws: Workspace, label: str, tool: str, envelope: dict[str, Any],
                meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """tools/call on the split surface; the result, and its envelope parsed as `envelope`."""
    headers = headers_for(ws, label)
    session = await initialize(client, headers, "2025-11-25")
    params: dict[str, Any] = {"name": tool, "arguments": envelope}
    if meta is not None:
        params["_meta"] = meta
    answer = await client.post(PATH + "?tools=split", headers={**headers, "Mcp-Session-Id": session},
                               json=rpc("tools/call", params))
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return {**result, "envelope": json.loads(result["content"][0]["text"])}


async def _create_entries(db: Any, ws: Workspace) -> list[AuditEntry]:
    return [e for e in await entries(db, ws.org.id) if e.coordinate == "entity_crud/spare_parts/spare_part/create"]


async def test_a_permitted_caller_gets_wrong_tool_variant_and_the_refusal_is_in_the_ledger(
        client: httpx.AsyncClient, factory: Factory, db: Any) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", risk_level="high")
    refused = await _call(client, ws, "agent", "prism_entity_crud_read", CREATE)
    assert refused["isError"] is True
    assert refused["envelope"]["error"] == "wrong_tool_variant"
    assert refused["envelope"]["message"] == ("operation 'create' of spare_parts/spare_part is a write operation, "
                                              "not a read one: call prism_entity_crud_write")
    assert refused["envelope"]["details"]["tool"] == "prism_entity_crud_write"
    [entry] = await _create_entries(db, ws)
    assert (entry.door, entry.tool_name, entry.outcome, entry.error_code) == (
        "mcp", "prism_entity_crud", "refused", "wrong_tool_variant")
    assert entry.detail["ai_system_id"] == made["ai_system"]["id"]
    # The caller's arguments were not at fault for any policy: governance let it through, the call failed.
    [decision] = (await ok(client, ws, "audit_query/governance/decision/list",
                           {"ai_system_id": made["ai_system"]["id"]}))["items"]
    assert decision["decision"] == "ALLOW" and "wrong_tool_variant" in decision["primary_reason"]
    # Through the variant of its kind the same call runs.
    created = await _call(client, ws, "agent", "prism_entity_crud_write", CREATE)
    assert created["isError"] is False, created


async def test_a_caller_that_may_not_call_the_operation_learns_its_permission_not_its_kind(
        client: httpx.AsyncClient, factory: Factory, db: Any) -> None:
    ws = await factory.workspace(roles=("owner", "viewer"))
    refused = await _call(client, ws, "viewer", "prism_entity_crud_read", CREATE)
    assert refused["envelope"]["error"] == "permission_denied"
    assert "prism_entity_crud_write" not in json.dumps(refused["envelope"])
    [entry] = await _create_entries(db, ws)
    assert (entry.outcome, entry.error_code) == ("refused", "permission_denied")
    # Another tenant's ledger holds none of it.
    other = await factory.workspace(roles=("owner",))
    assert await _create_entries(db, other) == []


async def test_an_idempotency_key_refused_through_the_wrong_variant_runs_through_the_right_one(
        client: httpx.AsyncClient, factory: Factory, db: Any) -> None:
    """A wrong variant is a refusal of the dispatcher's checks: nothing ran, so the key is not used up and the right
    variant's call with it runs (docs/idempotency.md). The variant is part of the request a key names: once the
    key has run through `_write`, the same arguments through `_read` are another request (409), not a replay."""
    ws = await factory.workspace(roles=("owner",))
    meta = {"idempotencyKey": "variant-key-1"}
    refused = await _call(client, ws, "owner", "prism_entity_crud_read", CREATE, meta)
    assert refused["envelope"]["error"] == "wrong_tool_variant"
    created = await _call(client, ws, "owner", "prism_entity_crud_write", CREATE, meta)
    assert created["envelope"]["success"] is True, created
    again = await _call(client, ws, "owner", "prism_entity_crud_read", CREATE, meta)
    assert again["envelope"]["error"] == "idempotency_key_reused", again
