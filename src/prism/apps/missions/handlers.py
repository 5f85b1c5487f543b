"""missions: plan a mission with a budget ceiling, start it, and close it (mission_control).

Calls made under an active mission (header `X-Prism-Mission` or envelope `mission_id`) spend their
handler's declared cost against the ceiling; see prism.governance.missions.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from prism.apps import shipped_examples
from prism.apps.params import ListParams, Params, ReadParams
from prism.errors import PermissionDenied
from prism.governance import missions
from prism.governance.models import Mission
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import OrgRepository, text_search

app = HandlerApp("missions", description="Missions: planned work with a budget ceiling for the calls made under it.",
                 examples=shipped_examples())

MissionStatus = Literal["planning", "active", "completed", "failed", "cancelled"]


class MissionCreate(Params):
    name: str = Field(..., min_length=1, max_length=255)
    description: str = Field("", max_length=4000)
    # strict: JSON's true is not a budget of 1 (pydantic's lax mode would take it as one).
    budget_ceiling: int = Field(..., ge=0, le=10**12, strict=True, description="Total declared cost calls may spend.")


class MissionList(ListParams):
    status: MissionStatus | None = None


@app.handler("mission_control", "mission", "create", params=MissionCreate, scope="execute",
             description="Plan a mission with a budget ceiling (status planning).",
             keywords=("new mission", "budget", "plan work", "project", "initiative", "campaign", "objective"))
async def create_mission(call: HandlerCall, p: MissionCreate) -> dict[str, Any]:
    _by_a_person(call, "plan")
    row = missions.repository(call.session, call.organization_id).add(
        tenant_id=call.auth.tenant_id, name=p.name, description=p.description, budget_ceiling=p.budget_ceiling,
        spent=0, status="planning", created_by=call.auth.user_id)
    await call.session.flush()
    return missions.mission_record(row)


@app.handler("mission_control", "mission", "list", params=MissionList, scope="read",
             description="List missions with their budget, spend and status.",
             keywords=("project", "initiative", "campaign", "objective", "budget"))
async def list_missions(call: HandlerCall, p: MissionList) -> dict[str, Any]:
    repo = OrgRepository(call.session, Mission, call.organization_id, label="mission")
    stmt = text_search(repo.base(), [Mission.name, Mission.description], p.search)
    if p.status:
        stmt = stmt.where(Mission.status == p.status)
    page = await repo.page(stmt, page=p.page, page_size=p.page_size, ordering=p.ordering,
                           orderable=("created_at", "name", "spent"), default_ordering="-created_at")
    for item in page["items"]:
        item["remaining"] = item["budget_ceiling"] - item["spent"]
    return page


@app.handler("mission_control", "mission", "read", params=ReadParams, scope="read",
             description="Read one mission: budget ceiling, spent, remaining, status.",
             keywords=("project", "initiative", "campaign", "objective", "budget left", "spend so far"))
async def read_mission(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return missions.mission_record(await missions.require_mission(call.session, call.organization_id, p.id))


def _by_a_person(call: HandlerCall, act: str) -> None:
    """Refuse a credential that is itself governed (a persona or an AI system applies to it: an agent's) the acts
    that give a budget: a mission's ceiling is what holds an agent's spending, and one it could plan and start for
    itself (and then name, as a persona's `require_mission` asks) would hold nothing. Ending a mission (complete,
    fail, cancel) spends nothing and stays open to the roles that may."""
    if call.auth.governed:
        raise PermissionDenied(f"this credential is governed by a persona or an AI system, so it cannot {act} "
                               "missions; a person does (the console, the CLI, or a key without either)",
                               code="governed_credential")


def _transition(status: str, description: str) -> None:
    @app.handler("mission_control", "mission", {"active": "start", "completed": "complete", "failed": "fail",
                                                "cancelled": "cancel"}[status],
                 params=ReadParams, scope="execute", permission="missions.change_mission", description=description,
                 destructive=status == "cancelled",
                 keywords=("project", "initiative", "campaign", "objective",
                           *{"active": ("launch", "kick off", "go live"),
                             "completed": ("finish", "wrap up", "accomplished"),
                             "failed": ("failed", "unsuccessful", "did not succeed"),
                             "cancelled": ("call off", "abandon")}[status]))
    async def move(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
        if status == "active":
            _by_a_person(call, "start")
        return await missions.transition(call.session, organization_id=call.organization_id,
                                         tenant_id=call.auth.tenant_id, mission_id=p.id, status=status)


_transition("active", "Start a planned mission (planning → active; emits mission.started).")
_transition("completed", "Complete an active mission (emits mission.completed).")
_transition("failed", "Mark an active mission failed.")
_transition("cancelled", "Cancel a planned or active mission.")
