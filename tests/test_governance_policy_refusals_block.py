"""A policy refusal of a governed call is a BLOCK decision, whatever its code: the refusal says it is one
(`PrismError.policy_refusal`), so a new refusal code cannot be left out of a list and recorded as ALLOW."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism import errors
from tests.factories import Factory, Workspace
from tests.governance_support import events, governed_key, ok, post

LIST = "entity_crud/spare_parts/spare_part/list"
APPROVE = "governance_review/governance/oversight_request/approve"


async def _decisions_of(client: httpx.AsyncClient, ws: Workspace, coordinate: str) -> list[dict[str, Any]]:
    listed = await ok(client, ws, "audit_query/governance/decision/list", {"page_size": 50})
    return [d for d in listed["items"] if d["coordinate"] == coordinate]


async def _assert_blocked(client: httpx.AsyncClient, db: Any, ws: Workspace, coordinate: str, code: str) -> None:
    [decision] = await _decisions_of(client, ws, coordinate)
    assert (decision["decision"], decision["policies_violated"]) == ("BLOCK", 1), decision
    assert decision["primary_reason"].startswith(f"{code}: ")
    blocks = [e for e in await events(db, ws.org.id, "governance.decision.block")
              if e["data"]["coordinate"] == coordinate]
    assert [e["data"]["decision"] for e in blocks] == ["BLOCK"]
    allows = [e for e in await events(db, ws.org.id, "governance.decision.allow")
              if e["data"]["coordinate"] == coordinate]
    assert allows == []


async def test_an_agent_approving_its_own_held_call_is_blocked(client: httpx.AsyncClient, factory: Factory,
                                                               db: Any) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={"name": "p", "default": "allow", "oversight": [LIST]},
                       risk_level="high")
    held = await post(client, ws, LIST, {}, label="agent")
    assert held.status_code == 202
    request_id = held.json()["details"]["oversight_request_id"]
    refused = await post(client, ws, APPROVE, {"id": request_id}, label="agent")
    assert refused.status_code == 403 and refused.json()["error"] == "self_approval_forbidden"
    await _assert_blocked(client, db, ws, APPROVE, "self_approval_forbidden")


async def test_an_agent_calling_a_people_only_handler_is_blocked(client: httpx.AsyncClient, factory: Factory,
                                                                db: Any) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", risk_level="high")
    refused = await post(client, ws, "config_manage/keys/key/create", {"name": "another"}, label="agent")
    assert refused.status_code == 403 and refused.json()["error"] == "person_required"
    await _assert_blocked(client, db, ws, "config_manage/keys/key/create", "person_required")
    # Another organization's decisions hold none of it.
    other = await factory.workspace(roles=("owner",))
    assert await _decisions_of(client, other, "config_manage/keys/key/create") == []


async def test_a_handler_that_finds_no_mission_is_a_failure_not_a_policy(client: httpx.AsyncClient,
                                                                         factory: Factory) -> None:
    """mission_not_found refuses a call under a mission that does not exist; reading one by id is the
    handler's own lookup: governance let the call through."""
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", risk_level="high")
    read = "mission_control/missions/mission/read"
    missing = await post(client, ws, read, {"id": "no-such-mission"}, label="agent")
    assert missing.status_code == 404 and missing.json()["error"] == "mission_not_found"
    [decision] = await _decisions_of(client, ws, read)
    assert decision["decision"] == "ALLOW"
    under = await post(client, ws, LIST, {}, label="agent", headers={"X-Prism-Mission": "no-such-mission"})
    assert under.status_code == 404 and under.json()["error"] == "mission_not_found"
    [decision] = await _decisions_of(client, ws, LIST)
    assert decision["decision"] == "BLOCK"


@pytest.mark.parametrize(("refusal", "policy"), [
    (errors.PermissionDenied("no"), True), (errors.PermissionDenied("no", code="a_future_refusal"), True),
    (errors.Blocked("no"), True), (errors.BudgetExceeded("no"), True), (errors.OversightRequired("held"), True),
    (errors.NotFound("no", code="oversight_request_not_found", policy_refusal=True), True),
    (errors.InvalidArguments("bad"), False), (errors.NotFound("none"), False),
])
def test_every_forbidding_refusal_is_a_policy_refusal_by_its_class(refusal: errors.PrismError, policy: bool) -> None:
    assert refusal.policy_refusal is policy
