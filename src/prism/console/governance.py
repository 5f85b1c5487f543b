"""Personas, AI systems and missions (/console/governance/): what governs the organization's agents.

Lists and the three create forms are dispatched calls (config_manage/governance/persona|ai_system/...,
mission_control/missions/mission/...); a form is shown only to roles whose permission the handler needs.
A mission's budget is shown as a meter of what its calls have spent against its ceiling.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller
from prism.console.pages import number_field, page, signed_in
from prism.errors import InvalidArguments, PrismError
from prism.web.browser import read_form, redirect

PATH = "/console/governance/"
PERSONA = "config_manage/governance/persona"
AI_SYSTEM = "config_manage/governance/ai_system"
MISSION = "mission_control/missions/mission"
RISK_LEVELS = ("minimal", "limited", "high", "unacceptable")


async def _show(request: Request, caller: ConsoleCaller, *, status: int = 200, error: str | None = None,
                notice: str | None = None, form: dict[str, str] | None = None) -> Response:
    # A section the role may not list shows that it may not (None), not a refusal of the whole page: a role that
    # may plan missions but not read personas still gets its form.
    lists: dict[str, list[Any] | None] = {}
    for name, coordinate in (("personas", PERSONA), ("ai_systems", AI_SYSTEM), ("missions", MISSION)):
        may_list = caller.may(f"{coordinate}/list", request)
        lists[name] = (await caller.call(request, f"{coordinate}/list", {"page_size": 100}))["items"] if may_list \
            else None
    return page("console_governance.html", request, caller, PATH, status=status, error=error, notice=notice,
                form=form or {}, risk_levels=RISK_LEVELS, **lists,
                may_persona=caller.may(f"{PERSONA}/create", request),
                may_ai_system=caller.may(f"{AI_SYSTEM}/create", request),
                may_mission=caller.may(f"{MISSION}/create", request))


@signed_in
async def overview(request: Request, caller: ConsoleCaller) -> Response:
    return await _show(request, caller, notice=caller.notice(request))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _whole_number(form: dict[str, str], name: str, *, required: bool) -> int | None:
    raw = form.get(name, "").strip()
    if not raw and not required:
        return None
    return number_field(name, raw)


def _arguments(kind: str, form: dict[str, str]) -> tuple[str, dict[str, Any]]:
    name = form.get("name", "").strip()
    if kind == "persona":
        arguments: dict[str, Any] = {"name": name, "default": form.get("default", "deny"),
                                     "allow": _lines(form.get("allow", "")), "deny": _lines(form.get("deny", "")),
                                     "oversight": _lines(form.get("oversight", "")),
                                     # A checkbox sends its value only when ticked.
                                     "require_mission": form.get("require_mission") == "on"}
        cost_cap = _whole_number(form, "cost_cap", required=False)
        if cost_cap is not None:
            arguments["cost_cap"] = cost_cap
        return f"{PERSONA}/create", arguments
    if kind == "ai_system":
        return f"{AI_SYSTEM}/create", {"name": name, "risk_level": form.get("risk_level", ""),
                                       "description": form.get("description", "")}
    if kind == "mission":
        return f"{MISSION}/create", {"name": name, "description": form.get("description", ""),
                                     "budget_ceiling": _whole_number(form, "budget_ceiling", required=True)}
    raise InvalidArguments("nothing to create here", details={"field": "kind"})


@signed_in
async def create(request: Request, caller: ConsoleCaller) -> Response:
    kind = request.path_params["kind"]
    form: dict[str, str] = {}
    try:
        form = await read_form(request)
        coordinate, arguments = _arguments(kind, form)
        made = await caller.call(request, coordinate, arguments)
    except PrismError as exc:
        return await _show(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})",
                           form={**form, "kind": kind})
    label = kind.replace("_", " ")
    return redirect(request, caller.link(PATH, notice=f"Created {label} {made.get('name', made.get('id'))}."))
