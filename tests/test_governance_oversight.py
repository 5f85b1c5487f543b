"""Human oversight end to end: escalate (202), approve or reject, run exactly once — and every refusal."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import events, governed_key, ok, post

GATED = {"name": "gated-vendors", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"],
         "oversight_priority": "high", "oversight_sla_seconds": 600}
CREATE = "entity_crud/finance/vendor/create"


async def _escalate(client: httpx.AsyncClient, ws: Workspace, arguments: dict[str, Any]) -> str:
    response = await post(client, ws, CREATE, arguments, label="agent")
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["success"] is False and body["error"] == "oversight_required"
    request_id: str = body["details"]["oversight_request_id"]
    assert request_id.startswith("ovr_") and request_id in body["message"]
    return request_id


async def _with(client: httpx.AsyncClient, ws: Workspace, arguments: dict[str, Any], request_id: str, *,
                label: str = "agent") -> httpx.Response:
    return await post(client, ws, CREATE, arguments, label=label, headers={"X-Prism-Oversight-Request": request_id})


async def _setup(client: httpx.AsyncClient, factory: Factory, sla: int = 600) -> Workspace:
    ws = await factory.workspace(roles=("owner", "member"))
    await governed_key(factory, client, ws, "agent", persona={**GATED, "oversight_sla_seconds": sla})
    return ws


async def test_an_escalated_call_runs_exactly_once_after_approval(client: httpx.AsyncClient, factory: Factory,
                                                                 db: Database) -> None:
    ws = await _setup(client, factory)
    args = {"name": "Acme"}
    request_id = await _escalate(client, ws, args)
    assert (await ok(client, ws, "entity_crud/finance/vendor/list", {}))["total"] == 0

    [event] = await events(db, ws.org.id, "governance.oversight.requested")
    assert event["event_id"] == request_id
    assert {k: event["data"][k] for k in ("request_id", "status", "priority")} == {
        "request_id": request_id, "status": "pending", "priority": "high"}
    assert "gated-vendors" in event["data"]["oversight_reason"] and event["data"]["sla_deadline"].endswith("Z")
    pending = await ok(client, ws, "governance_review/governance/oversight_request/list", {"status": "pending"})
    assert [r["id"] for r in pending["items"]] == [request_id]
    assert pending["items"][0]["arguments"] == args  # what the person deciding reads

    early = await _with(client, ws, args, request_id)
    assert early.status_code == 409 and early.json()["error"] == "oversight_pending"
    by_member = await post(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id},
                           label="member")
    assert by_member.status_code == 403 and by_member.json()["error"] == "permission_denied"
    approved = await ok(client, ws, "governance_review/governance/oversight_request/approve",
                        {"id": request_id, "note": "known supplier"})
    assert approved["status"] == "approved"

    other_args = await _with(client, ws, {"name": "Evil Corp"}, request_id)
    assert other_args.status_code == 409 and other_args.json()["error"] == "oversight_arguments_mismatch"
    ran = await _with(client, ws, args, request_id)
    assert ran.status_code == 200, ran.text and ran.json()["data"]["name"] == "Acme"
    again = await _with(client, ws, args, request_id)
    assert again.status_code == 409 and again.json()["error"] == "oversight_request_used"
    assert (await ok(client, ws, "entity_crud/finance/vendor/list", {}))["total"] == 1
    read = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
    assert read["status"] == "consumed" and read["consumed_at"] is not None


async def test_concurrent_uses_of_one_approval_run_the_call_once(client: httpx.AsyncClient,
                                                                 factory: Factory) -> None:
    ws = await _setup(client, factory)
    args = {"name": "Once Ltd"}
    request_id = await _escalate(client, ws, args)
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    responses = await asyncio.gather(*(_with(client, ws, args, request_id) for _ in range(8)))
    assert sorted(r.status_code for r in responses) == [200] + [409] * 7
    assert (await ok(client, ws, "entity_crud/finance/vendor/list", {}))["total"] == 1


async def test_a_rejected_request_can_never_run(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await _setup(client, factory)
    args = {"name": "Shady"}
    request_id = await _escalate(client, ws, args)
    await ok(client, ws, "governance_review/governance/oversight_request/reject", {"id": request_id, "note": "no"})
    refused = await _with(client, ws, args, request_id)
    assert refused.status_code == 403 and refused.json()["error"] == "oversight_rejected"
    twice = await post(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    assert twice.status_code == 409 and twice.json()["error"] == "invalid_transition"


async def test_expired_requests_cannot_be_approved_or_used(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await _setup(client, factory, sla=1)
    late = await _escalate(client, ws, {"name": "Late"})
    used_late = await _escalate(client, ws, {"name": "Used late"})
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": used_late})
    await asyncio.sleep(1.2)
    approve = await post(client, ws, "governance_review/governance/oversight_request/approve", {"id": late})
    assert approve.status_code == 409 and approve.json()["error"] == "oversight_request_expired"
    use = await _with(client, ws, {"name": "Used late"}, used_late)
    assert use.status_code == 409 and use.json()["error"] == "oversight_request_expired"


async def test_unknown_foreign_and_self_approved_requests_are_refused(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws = await _setup(client, factory)
    unknown = await _with(client, ws, {"name": "X"}, "ovr_" + "0" * 32)
    assert unknown.status_code == 404 and unknown.json()["error"] == "oversight_request_not_found"
    # The envelope field works like the header.
    request_id = await _escalate(client, ws, {"name": "Mine"})
    await governed_key(factory, client, ws, "agent2", persona={**GATED, "name": "second"})
    other_key = await post(client, ws, CREATE, {"name": "Mine"}, label="agent2",
                           envelope={"oversight_request_id": request_id})
    assert other_key.status_code == 403 and other_key.json()["error"] == "oversight_request_not_yours"
    # The user whose call was escalated may not approve it, whatever their role.
    self_request = await _escalate_as(client, factory, ws)
    own = await post(client, ws, "governance_review/governance/oversight_request/approve", {"id": self_request},
                     label="self-agent")
    assert own.status_code == 403 and own.json()["error"] == "self_approval_forbidden"


async def _escalate_as(client: httpx.AsyncClient, factory: Factory, ws: Workspace) -> str:
    """An owner-role key with the persona, so its own user holds the approve permission."""
    await governed_key(factory, client, ws, "self-agent", persona={**GATED, "name": "self"})
    response = await post(client, ws, CREATE, {"name": "Self"}, label="self-agent")
    assert response.status_code == 202, response.text
    request_id: str = response.json()["details"]["oversight_request_id"]
    return request_id


async def test_oversight_requests_of_one_tenant_are_invisible_and_unusable_from_another(
        client: httpx.AsyncClient, factory: Factory) -> None:
    a = await _setup(client, factory)
    b = await _setup(client, factory)
    request_id = await _escalate(client, a, {"name": "A only"})
    assert (await ok(client, b, "governance_review/governance/oversight_request/list", {}))["total"] == 0
    approve = await post(client, b, "governance_review/governance/oversight_request/approve", {"id": request_id})
    assert approve.status_code == 404
    await ok(client, a, "governance_review/governance/oversight_request/approve", {"id": request_id})
    use = await _with(client, b, {"name": "A only"}, request_id)
    assert use.status_code == 404 and use.json()["error"] == "oversight_request_not_found"


async def test_an_approval_is_for_the_mission_the_escalated_call_named(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    """The mission pays for the call: an approval given for the call under one mission does not run it under
    another, or under none, and the person deciding sees which mission it is."""
    ws = await _setup(client, factory)
    paying, other = [(await ok(client, ws, "mission_control/missions/mission/start", {"id": made["id"]}))["id"]
                     for made in [await ok(client, ws, "mission_control/missions/mission/create",
                                           {"name": name, "budget_ceiling": 10}) for name in ("Paying", "Other")]]
    args = {"name": "Mission-bound Inc"}
    escalated = await post(client, ws, CREATE, args, label="agent", headers={"X-Prism-Mission": paying})
    assert escalated.status_code == 202, escalated.text
    request_id = escalated.json()["details"]["oversight_request_id"]
    shown = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
    assert shown["mission_id"] == paying
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    approval = {"X-Prism-Oversight-Request": request_id}
    elsewhere = await post(client, ws, CREATE, args, label="agent", headers={**approval, "X-Prism-Mission": other})
    unpaid = await post(client, ws, CREATE, args, label="agent", headers=approval)
    for refused in (elsewhere, unpaid):
        assert refused.status_code == 409 and refused.json()["error"] == "oversight_arguments_mismatch", refused.text
    ran = await post(client, ws, CREATE, args, label="agent", headers={**approval, "X-Prism-Mission": paying})
    assert ran.status_code == 200, ran.text
    missions = {m["id"]: m["spent"] for m in (await ok(client, ws, "mission_control/missions/mission/list",
                                                       {}))["items"]}
    assert missions[other] == 0 and missions[paying] > 0
