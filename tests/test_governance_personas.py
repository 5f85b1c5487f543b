"""Personas: deny wins on every door, with a BLOCK decision, an audit entry and its event; allow, default,
cost cap; management through handlers; tenant isolation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.governance.models import GovernanceDecision
from prism.governance.policy import compile_patterns
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import SPEC_DECISION_FIELDS, entries, events, governed_key, ok, post

NO_DELETES = {"name": "no-deletes", "deny": ["*/*/*/delete"], "default": "allow"}


async def _part(client: httpx.AsyncClient, ws: Workspace, sku: str) -> dict[str, Any]:
    data: dict[str, Any] = await ok(client, ws, "entity_crud/spare_parts/spare_part/create",
                                    {"sku": sku, "name": f"part {sku}"})
    return data


async def _through(client: httpx.AsyncClient, ws: Workspace, door: str, label: str, part_id: str) -> httpx.Response:
    headers = ws.headers(label)
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": "delete", "arguments": {"id": part_id}}
    if door == "canonical":
        return await client.post("/api/mcp/tools/prism_entity_crud/", json=envelope, headers=headers)
    if door == "sandbox":
        return await client.post("/api/v1/dev/call/", json={"name": "prism_entity_crud", "arguments": envelope},
                                 headers=headers)
    return await client.post("/prism/entity_crud/spare_parts/spare_part/delete", json={"id": part_id},
                             headers=headers)


@pytest.mark.parametrize("door", ["canonical", "sandbox", "prism_path"])
async def test_a_persona_denying_deletes_blocks_them_on_every_door_with_decision_entry_and_event(
        client: httpx.AsyncClient, factory: Factory, db: Database, door: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona=NO_DELETES, risk_level="high")
    part = await _part(client, ws, "P-1")

    response = await _through(client, ws, door, "agent", part["id"])

    assert response.status_code == 403, response.text
    assert response.json()["error"] == "blocked"
    last = (await entries(db, ws.org.id))[-1]
    # The part is still there: the call never ran.
    assert (await ok(client, ws, "entity_crud/spare_parts/spare_part/read", {"id": part["id"]}))["id"] == part["id"]
    assert (last.coordinate, last.outcome, last.error_code) == (
        "entity_crud/spare_parts/spare_part/delete", "refused", "blocked")
    assert last.detail["persona"]["rule"] == "deny"  # type: ignore[index]
    async with db.read() as session:
        decision = (await session.execute(select(GovernanceDecision).where(
            GovernanceDecision.organization_id == ws.org.id))).scalar_one()
    assert (decision.decision, decision.decision_type, decision.policies_violated) == ("BLOCK", "agent_action", 1)
    [event] = await events(db, ws.org.id, "governance.decision.block")
    data = event["data"]
    assert SPEC_DECISION_FIELDS <= set(data)
    assert event["event_id"] == data["decision_id"] == decision.id and decision.id.startswith("dec_")
    assert data["decision"] == "BLOCK" and data["decision_type"] == "agent_action"
    assert data["ai_system"] == {"id": made["ai_system"]["id"], "name": "agent agent"}
    assert data["policies_evaluated"] == 2 and data["policies_violated"] == 1
    assert isinstance(data["latency_ms"], int) and data["latency_ms"] >= 0
    assert isinstance(data["trace_id"], str) and len(data["trace_id"]) == 32
    assert "no-deletes" in data["primary_reason"] and "blocked" in data["primary_reason"]
    assert await events(db, ws.org.id, "governance.decision.allow") == []


async def test_an_allowed_call_by_an_ai_system_records_an_allow_decision(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona=NO_DELETES, risk_level="limited")
    await ok(client, ws, "entity_crud/spare_parts/spare_part/list", {}, label="agent")
    [event] = await events(db, ws.org.id, "governance.decision.allow")
    assert event["data"]["decision"] == "ALLOW" and event["data"]["policies_violated"] == 0
    assert event["data"]["risk_level"] == "limited"
    listed = await ok(client, ws, "audit_query/governance/decision/list", {"decision": "ALLOW"})
    assert [d["id"] for d in listed["items"]] == [event["data"]["decision_id"]]
    other = await factory.workspace(roles=("owner",))
    foreign = await post(client, other, "audit_query/governance/decision/read", {"id": event["data"]["decision_id"]})
    assert foreign.status_code == 404
    assert (await ok(client, other, "audit_query/governance/decision/list", {}))["total"] == 0


async def test_default_deny_allow_patterns_and_cost_cap(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "reader", persona={
        "name": "reader", "allow": ["entity_crud/spare_parts/*/list"], "default": "deny"})
    await governed_key(factory, client, ws, "capped", persona={"name": "capped", "default": "allow", "cost_cap": 0})
    listed = await post(client, ws, "entity_crud/spare_parts/spare_part/list", {}, label="reader")
    refused = await post(client, ws, "entity_crud/finance/vendor/list", {}, label="reader")
    capped = await post(client, ws, "entity_crud/spare_parts/spare_part/list", {}, label="capped")
    assert listed.status_code == 200, listed.text
    assert refused.status_code == 403 and refused.json()["error"] == "blocked"
    assert "default deny" in refused.json()["message"]
    assert capped.status_code == 403 and capped.json()["details"]["rule"] == "cost_cap"  # list costs 1 > cap 0


async def test_tightening_a_persona_applies_to_the_next_call(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "open", "default": "allow"})
    assert (await post(client, ws, "entity_crud/finance/vendor/list", {}, label="agent")).status_code == 200
    updated = await ok(client, ws, "config_manage/governance/persona/update",
                       {"id": made["persona"]["id"], "deny": ["entity_crud/finance/*/*"]})
    assert updated["version"] == 2 and updated["deny"] == ["entity_crud/finance/*/*"]
    assert (await post(client, ws, "entity_crud/finance/vendor/list", {}, label="agent")).status_code == 403


async def test_deny_wins_over_allow_and_patterns_match_whole_segments() -> None:
    allow = compile_patterns(["entity_crud/finance/invoice/*"])
    assert allow is not None and allow.match("entity_crud/finance/invoice/update")
    assert not allow.match("entity_crud/finance/invoice_line/update")
    assert not allow.match("entity_crud/finance/invoice/update/extra")
    wild = compile_patterns(["report_query/finance/*/aging*"])
    assert wild is not None and wild.match("report_query/finance/invoice/agingApSummary")


async def test_bad_patterns_and_unknown_fields_are_refused_with_400(client: httpx.AsyncClient,
                                                                     factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    bad = await post(client, ws, "config_manage/governance/persona/create", {"name": "x", "deny": ["delete"]})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_arguments"
    assert "four segments" in bad.json()["message"]
    dup = {"name": "same"}
    assert (await post(client, ws, "config_manage/governance/persona/create", dup)).status_code == 200
    again = await post(client, ws, "config_manage/governance/persona/create", dup)
    assert again.status_code == 409 and again.json()["error"] == "conflict"


async def test_a_persona_in_use_cannot_be_deleted_and_members_cannot_manage_personas(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "p"})
    in_use = await post(client, ws, "config_manage/governance/persona/delete", {"id": made["persona"]["id"]})
    assert in_use.status_code == 409 and in_use.json()["error"] == "persona_in_use"
    by_member = await post(client, ws, "config_manage/governance/persona/create", {"name": "m"}, label="member")
    assert by_member.status_code == 403 and by_member.json()["error"] == "permission_denied"


async def test_personas_of_one_tenant_are_invisible_and_unusable_from_another(
        client: httpx.AsyncClient, factory: Factory) -> None:
    a = await factory.workspace(roles=("owner",))
    b = await factory.workspace(roles=("owner",))
    persona = await ok(client, a, "config_manage/governance/persona/create", {"name": "secret"})
    assert (await ok(client, b, "config_manage/governance/persona/list", {}))["total"] == 0
    read = await post(client, b, "config_manage/governance/persona/read", {"id": persona["id"]})
    assert read.status_code == 404
    await factory.add_key(b, "agent")
    from prism.keys.service import lookup_of
    attach = await post(client, b, "config_manage/governance/persona/attach",
                        {"key": lookup_of(b.keys["agent"]), "persona_id": persona["id"]})
    assert attach.status_code == 404
    # ... nor can tenant B attach anything to tenant A's keys.
    mine = await ok(client, b, "config_manage/governance/persona/create", {"name": "b-persona"})
    steal = await post(client, b, "config_manage/governance/persona/attach",
                       {"key": lookup_of(a.keys["owner"]), "persona_id": mine["id"]})
    assert steal.status_code == 404


async def test_a_permission_refusal_of_an_ai_system_is_a_block_decision_too(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "watcher", risk_level="minimal", role="viewer")
    refused = await post(client, ws, "entity_crud/spare_parts/spare_part/create", {"sku": "S", "name": "s"},
                         label="watcher")
    assert refused.status_code == 403 and refused.json()["error"] == "permission_denied"
    [event] = await events(db, ws.org.id, "governance.decision.block")
    assert event["data"]["primary_reason"].startswith("permission_denied")
    assert event["data"]["policies_evaluated"] == 1 and event["data"]["risk_level"] == "minimal"
