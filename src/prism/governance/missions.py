"""Missions: a budget ceiling that calls made under the mission spend against.

Charging is ONE conditional UPDATE (`spent + cost <= budget_ceiling`) in the ledger transaction, never a
read followed by a write: concurrent calls (other lanes, other processes) queue on the mission's row
and each re-checks the condition against the committed total, so a budget for 10 runs exactly 10.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import BudgetExceeded, Conflict, NotFound
from prism.events.outbox import emit
from prism.governance.models import Mission
from prism.kit.timeutil import utcnow
from prism.tenancy.repository import OrgRepository, to_record
from prism.tenancy.scope import acting_for

# planning → active → completed; planning/active → cancelled; active → failed.
TRANSITIONS: dict[str, frozenset[str]] = {
    "planning": frozenset({"active", "cancelled"}),
    "active": frozenset({"completed", "failed", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
EVENT_OF_STATUS = {"active": "mission.started", "completed": "mission.completed"}


def repository(session: AsyncSession, organization_id: str) -> OrgRepository[Mission]:
    return OrgRepository(session, Mission, organization_id, label="mission")


async def charge(session: AsyncSession, organization_id: str, mission_id: str, cost: int) -> None:
    """Add `cost` to the mission's spend, or refuse: 404 unknown, 409 not active, 403 budget_exceeded."""
    with acting_for(session, organization_id):
        result = await session.execute(
            update(Mission)
            .where(Mission.id == mission_id, Mission.status == "active",
                   Mission.spent + cost <= Mission.budget_ceiling)
            .values(spent=Mission.spent + cost).execution_options(synchronize_session=False))
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return
    mission = await require_mission(session, organization_id, mission_id, governing=True)
    if mission.status != "active":
        raise Conflict(f"mission {mission_id} is {mission.status}; calls run only under an active mission",
                       code="mission_not_active", policy_refusal=True)
    raise BudgetExceeded(f"mission {mission_id} has spent {mission.spent} of its budget of "
                         f"{mission.budget_ceiling}; this call costs {cost}",
                         details={"mission_id": mission_id, "spent": mission.spent,
                                  "budget_ceiling": mission.budget_ceiling, "cost": cost})


async def note_exceeded(session: AsyncSession, *, organization_id: str, tenant_id: str, mission_id: str,
                        cost: int, coordinate: str) -> bool:
    """Mark the first refusal for budget and emit `mission.budget_exceeded` — once per mission, ever."""
    moment = utcnow()
    with acting_for(session, organization_id):
        result = await session.execute(
            update(Mission)
            .where(Mission.id == mission_id, Mission.budget_exceeded_at.is_(None))
            .values(budget_exceeded_at=moment)
            .returning(Mission.name, Mission.spent, Mission.budget_ceiling)
            .execution_options(synchronize_session=False))
        row = result.first()
    if row is None:
        return False
    await emit(session, organization_id=organization_id, tenant_id=tenant_id, event_type="mission.budget_exceeded",
               data={"mission_id": mission_id, "name": row.name, "budget_ceiling": row.budget_ceiling,
                     "spent": row.spent, "attempted_cost": cost, "coordinate": coordinate})
    return True


async def transition(session: AsyncSession, *, organization_id: str, tenant_id: str, mission_id: str,
                     status: str) -> dict[str, Any]:
    mission = await repository(session, organization_id).get(mission_id)
    if status not in TRANSITIONS[mission.status]:
        allowed = ", ".join(sorted(TRANSITIONS[mission.status])) or "none"
        raise Conflict(f"mission cannot go from {mission.status} to {status} (allowed: {allowed})",
                       code="invalid_transition")
    moment = utcnow()
    mission.status = status
    if status == "active":
        mission.started_at = moment
    else:
        mission.ended_at = moment
    await session.flush()
    record = mission_record(mission)
    event_type = EVENT_OF_STATUS.get(status)
    if event_type is not None:
        await emit(session, organization_id=organization_id, tenant_id=tenant_id, event_type=event_type,
                   data=mission_event_data(mission))
    return record


def mission_record(mission: Mission) -> dict[str, Any]:
    record = to_record(mission)
    record["remaining"] = mission.budget_ceiling - mission.spent
    return record


def mission_event_data(mission: Mission) -> dict[str, Any]:
    record = to_record(mission)
    return {"mission_id": mission.id, "name": mission.name, "status": mission.status,
            "budget_ceiling": mission.budget_ceiling, "spent": mission.spent,
            "started_at": record["started_at"], "ended_at": record["ended_at"]}


async def require_mission(session: AsyncSession, organization_id: str, mission_id: str, *,
                          governing: bool = False) -> Mission:
    """The mission, or 404 `mission_not_found`. `governing`: the mission a call runs under, whose absence refuses
    the call by policy (a BLOCK decision); a handler that reads a mission by id just finds none."""
    try:
        return await repository(session, organization_id).get(mission_id)
    except NotFound:
        raise NotFound(f"mission {mission_id!r} not found", code="mission_not_found",
                       policy_refusal=governing) from None
