"""Missions: the state machine and its events, budgets exact under concurrency, tenant isolation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import entries, events, governed_key, ok, post

LIST = "entity_crud/spare_parts/spare_part/list"  # declared cost 1


async def mission(client: httpx.AsyncClient, ws: Workspace, budget: int, *, start: bool = True) -> dict[str, Any]:
    made: dict[str, Any] = await ok(client, ws, "mission_control/missions/mission/create",
                                    {"name": "Quarter close", "budget_ceiling": budget})
    if start:
        made = await ok(client, ws, "mission_control/missions/mission/start", {"id": made["id"]})
    return made


async def test_mission_moves_planning_active_completed_with_events_and_refuses_illegal_moves(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    planned = await mission(client, ws, 5, start=False)
    assert planned["status"] == "planning" and planned["remaining"] == 5
    early = await post(client, ws, "mission_control/missions/mission/complete", {"id": planned["id"]})
    assert early.status_code == 409 and early.json()["error"] == "invalid_transition"
    under_planning = await post(client, ws, LIST, {}, headers={"X-Prism-Mission": planned["id"]})
    assert under_planning.status_code == 409 and under_planning.json()["error"] == "mission_not_active"
    started = await ok(client, ws, "mission_control/missions/mission/start", {"id": planned["id"]})
    assert started["status"] == "active" and started["started_at"] is not None
    done = await ok(client, ws, "mission_control/missions/mission/complete", {"id": planned["id"]})
    assert done["status"] == "completed" and done["ended_at"] is not None
    [started_event] = await events(db, ws.org.id, "mission.started")
    [completed_event] = await events(db, ws.org.id, "mission.completed")
    assert started_event["data"]["mission_id"] == completed_event["data"]["mission_id"] == planned["id"]
    assert completed_event["data"]["status"] == "completed"
    closed = await post(client, ws, "mission_control/missions/mission/cancel", {"id": planned["id"]})
    assert closed.status_code == 409
    other = await mission(client, ws, 5, start=False)
    assert (await ok(client, ws, "mission_control/missions/mission/cancel", {"id": other["id"]}))["status"] == \
        "cancelled"
    third = await mission(client, ws, 5)
    assert (await ok(client, ws, "mission_control/missions/mission/fail", {"id": third["id"]}))["status"] == "failed"
    listed = await ok(client, ws, "mission_control/missions/mission/list", {"status": "failed"})
    assert [m["id"] for m in listed["items"]] == [third["id"]]


async def test_a_hundred_parallel_calls_against_a_budget_of_ten_run_exactly_ten(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    m = await mission(client, ws, 10)
    headers = {"X-Prism-Mission": m["id"]}
    responses = await asyncio.gather(*(post(client, ws, LIST, {}, headers=headers) for _ in range(100)))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 10 and statuses.count(403) == 90, statuses
    assert {r.json()["error"] for r in responses if r.status_code == 403} == {"budget_exceeded"}
    read = await ok(client, ws, "mission_control/missions/mission/read", {"id": m["id"]})
    assert (read["spent"], read["remaining"]) == (10, 0) and read["budget_exceeded_at"] is not None
    [exceeded] = await events(db, ws.org.id, "mission.budget_exceeded")
    assert exceeded["data"]["mission_id"] == m["id"] and exceeded["data"]["budget_ceiling"] == 10
    under_mission = [e for e in await entries(db, ws.org.id) if e.detail.get("mission_id") == m["id"]]
    assert len(under_mission) == 100
    assert sum(e.outcome == "allowed" for e in under_mission) == 10


async def test_the_mission_id_in_the_envelope_spends_like_the_header(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    m = await mission(client, ws, 1)
    first = await post(client, ws, LIST, {}, envelope={"mission_id": m["id"]})
    second = await post(client, ws, LIST, {}, envelope={"mission_id": m["id"]})
    assert (first.status_code, second.status_code) == (200, 403)
    assert second.json()["details"]["budget_ceiling"] == 1
    clash = await post(client, ws, LIST, {}, envelope={"mission_id": m["id"]}, headers={"X-Prism-Mission": "other"})
    assert clash.status_code == 400 and clash.json()["error"] == "invalid_arguments"
    bad = await post(client, ws, LIST, {}, envelope={"mission_id": 7})
    assert bad.status_code == 400


async def test_a_failed_call_under_a_mission_spends_nothing(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    m = await mission(client, ws, 3)
    missing = await post(client, ws, "entity_crud/spare_parts/spare_part/read", {"id": "nope"},
                         headers={"X-Prism-Mission": m["id"]})
    assert missing.status_code == 404
    assert (await ok(client, ws, "mission_control/missions/mission/read", {"id": m["id"]}))["spent"] == 0


async def test_missions_of_one_tenant_are_invisible_and_unusable_from_another(
        client: httpx.AsyncClient, factory: Factory) -> None:
    a = await factory.workspace(roles=("owner",))
    b = await factory.workspace(roles=("owner",))
    m = await mission(client, a, 10)
    assert (await ok(client, b, "mission_control/missions/mission/list", {}))["total"] == 0
    assert (await post(client, b, "mission_control/missions/mission/read", {"id": m["id"]})).status_code == 404
    assert (await post(client, b, "mission_control/missions/mission/complete", {"id": m["id"]})).status_code == 404
    spend = await post(client, b, LIST, {}, headers={"X-Prism-Mission": m["id"]})
    assert spend.status_code == 404 and spend.json()["error"] == "mission_not_found"
    assert (await ok(client, a, "mission_control/missions/mission/read", {"id": m["id"]}))["spent"] == 0


async def test_an_agents_credential_cannot_plan_or_start_a_mission_to_escape_its_budget(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """A persona that requires a mission holds the agent to that mission's budget; an agent that could plan and
    start a mission of its own, with any ceiling, and name it would hold itself to nothing."""
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", role="member", risk_level="high",
                       persona={"name": "Budgeted agent", "default": "allow", "require_mission": True})
    held = await mission(client, ws, 5)
    under_budget = {"X-Prism-Mission": held["id"]}
    planned = await post(client, ws, "mission_control/missions/mission/create",
                         {"name": "Unlimited", "budget_ceiling": 10**12}, label="agent", headers=under_budget)
    someone_elses = await mission(client, ws, 100, start=False)
    started = await post(client, ws, "mission_control/missions/mission/start", {"id": someone_elses["id"]},
                         label="agent", headers=under_budget)
    finished = await post(client, ws, "mission_control/missions/mission/complete", {"id": held["id"]},
                          label="agent", headers=under_budget)
    for refused in (planned, started):
        assert refused.status_code == 403 and refused.json()["error"] == "governed_credential", refused.text
    assert finished.status_code == 200, finished.text  # ending its own mission gives it nothing
    listed = await ok(client, ws, "mission_control/missions/mission/list", {})
    assert {m["name"] for m in listed["items"]} == {"Quarter close"}  # nothing planned by the agent
    assert (await ok(client, ws, "mission_control/missions/mission/read", {"id": someone_elses["id"]}))["status"] \
        == "planning"
    blocks = await events(db, ws.org.id, "governance.decision.block")
    assert sorted(b["data"]["coordinate"] for b in blocks) == [
        "mission_control/missions/mission/create", "mission_control/missions/mission/start"], blocks
    owner = await ok(client, ws, "mission_control/missions/mission/start", {"id": someone_elses["id"]})
    assert owner["status"] == "active"  # a person still does
