"""The oversight inbox (/console/oversight/): pending requests to decide, and those decided.

Lists, approvals and rejections are dispatched calls (governance_review/governance/oversight_request/...): the
four-eyes rule (the person whose call was escalated cannot decide it) and the permission
`governance.approve_oversight_request` are the handler's; the page only hides the buttons a person could not
use. The inbox refreshes itself: its script polls `state/`, a direct read of how many requests are pending and
the newest one's id (so that polling writes no ledger entries), and reloads the list through the dispatcher
when it changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from prism.console.caller import ConsoleCaller
from prism.console.changes import compare
from prism.console.pages import member_emails, page, signed_in
from prism.errors import InvalidArguments, PermissionDenied, PrismError
from prism.governance.models import OversightRequest
from prism.kit.timeutil import utcnow
from prism.tenancy.repository import OrgRepository
from prism.web.browser import read_form, redirect

PATH = "/console/oversight/"
BASE = "governance_review/governance/oversight_request"


async def _state(request: Request, caller: ConsoleCaller) -> str:
    async with request.app.state.db.read() as session:
        repo = OrgRepository(session, OversightRequest, caller.auth.organization_id, label="oversight request")
        pending = repo.base().where(OversightRequest.status == "pending").subquery()
        count, newest = (await session.execute(
            select(func.count(), func.max(pending.c.created_at)).select_from(pending))).one()
    return f"{count}:{newest.isoformat() if newest else ''}"


def _sla(record: dict[str, Any], now: datetime) -> dict[str, Any]:
    deadline = datetime.fromisoformat(record["sla_deadline"].replace("Z", "+00:00"))
    seconds = int((deadline - now).total_seconds())
    minutes = abs(seconds) // 60
    record["sla_text"] = f"due in {minutes} min" if seconds >= 0 else f"overdue by {minutes} min"
    record["overdue"] = seconds < 0
    return record


async def _inbox(request: Request, caller: ConsoleCaller, *, status: int = 200, error: str | None = None,
                 notice: str | None = None) -> Response:
    waiting = await caller.call(request, f"{BASE}/list", {"decided": False, "page_size": 100, "ordering": "urgency"})
    pending = waiting["items"]
    decided = (await caller.call(request, f"{BASE}/list", {"decided": True, "page_size": 30,
                                                            "ordering": "-decided_at"}))["items"]
    async with request.app.state.db.read() as session:
        emails = await member_emails(session, caller.auth.organization_id,
                                     {r["requested_by"] for r in pending + decided}
                                     | {r["decided_by"] for r in decided})
    now = utcnow()
    pending = [_sla(r, now) for r in pending]
    return page("console_oversight.html", request, caller, PATH, status=status, error=error, notice=notice,
                pending=pending, pending_total=waiting["total"], decided=decided, emails=emails,
                state=await _state(request, caller),
                comparisons=await compare(request, caller, pending),
                may_decide=caller.may(f"{BASE}/approve", request))


@signed_in
async def inbox(request: Request, caller: ConsoleCaller) -> Response:
    return await _inbox(request, caller, notice=caller.notice(request))


@signed_in
async def state(request: Request, caller: ConsoleCaller) -> Response:
    """What the inbox's page polls for: answered only to whom the inbox itself is (a permission check: polling
    writes nothing to the ledger)."""
    if not caller.may(f"{BASE}/list", request):
        raise PermissionDenied("your role may not read this organization's oversight requests")
    return PlainTextResponse(await _state(request, caller), headers={"Cache-Control": "no-store"})


@signed_in
async def decide(request: Request, caller: ConsoleCaller) -> Response:
    request_id = request.path_params["request_id"]
    try:
        form = await read_form(request)
        verdict = form.get("decision")
        if verdict not in ("approve", "reject"):
            raise InvalidArguments("decision: approve or reject", details={"field": "decision"})
        decided = await caller.call(request, f"{BASE}/{verdict}", {"id": request_id, "note": form.get("note", "")})
    except PrismError as exc:
        return await _inbox(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})")
    return redirect(request, caller.link(PATH, notice=f"Request {decided['id']} {decided['status']}."))
