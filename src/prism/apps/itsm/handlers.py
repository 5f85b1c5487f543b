"""itsm: tickets (new → assigned → in_progress → resolved → closed; resolved → in_progress on reopen;
cancelled before resolution), comments, services and SLA policies.

A ticket gets the next number of its organization and an SLA deadline from the policy of its priority
(none without a policy); creating one emits ticket.created.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, repo
from prism.apps.itsm.models import Service, SlaPolicy, Ticket, TicketComment, TicketCounter
from prism.apps.itsm.params import (
    TIER_RANK,
    AutoAssign,
    CommentCreate,
    CommentList,
    ServiceCreate,
    ServiceList,
    ServiceUpdate,
    SlaCreate,
    SlaList,
    SlaReportParams,
    SlaUpdate,
    TicketAction,
    TicketAssign,
    TicketCreate,
    TicketEscalate,
    TicketList,
    TicketReason,
    TicketResolve,
    TicketUpdate,
)
from prism.apps.states import move
from prism.errors import Conflict, InvalidArguments
from prism.events.outbox import emit_for
from prism.kit.timeutil import iso, utcnow
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("itsm", description="IT service management: tickets, comments, services, SLAs.",
                 examples=shipped_examples())

TICKET_TRANSITIONS: dict[str, frozenset[str]] = {
    "new": frozenset({"assigned", "cancelled"}),
    "assigned": frozenset({"in_progress", "resolved", "cancelled"}),
    "in_progress": frozenset({"resolved", "cancelled"}),
    "resolved": frozenset({"closed", "in_progress"}),
    "closed": frozenset(),
    "cancelled": frozenset(),
}
OPEN = ("new", "assigned", "in_progress")



async def _ticket(call: HandlerCall, ticket_id: str) -> Ticket:
    row: Ticket = await repo(call, Ticket, "ticket").get(ticket_id)
    return row


async def _sla_hours(call: HandlerCall, priority: str) -> int | None:
    hours: int | None = (await call.session.execute(select(SlaPolicy.resolve_hours).where(
        SlaPolicy.priority == priority))).scalar_one_or_none()
    return hours


async def _next_number(call: HandlerCall) -> int:
    """The organization's next ticket number, never one given before (not even to a ticket since deleted).

    The counter's row adds no waiting: write handlers of one organization already take turns, holding its row
    (prism.ledger.writer), and only they create tickets."""
    counted = (await call.session.execute(
        update(TicketCounter).where(TicketCounter.organization_id == call.organization_id)
        .values(last_number=TicketCounter.last_number + 1).returning(TicketCounter.last_number))).scalar_one_or_none()
    if counted is not None:
        return int(counted)
    # The organization's first ticket since numbers are counted (migration 0034 counts on from the tickets stored
    # before it; seeded tickets have no counter): on from its highest number.
    last = (await call.session.execute(select(func.max(Ticket.number)))).scalar_one()
    number = (last or 0) + 1
    repo(call, TicketCounter, "ticket counter").add(last_number=number)
    return number


async def _prepare_ticket(call: HandlerCall, values: dict[str, Any], row: Ticket | None) -> dict[str, Any]:
    if values.get("service_id") is not None:
        await repo(call, Service, "service").get(values["service_id"])
    if row is None:
        hours = await _sla_hours(call, values["priority"])
        values = {**values, "number": await _next_number(call),
                  "requester_email": values["requester_email"] or call.auth.user_email,
                  "sla_due_at": utcnow() + timedelta(hours=hours) if hours else None}
    return values


async def _ticket_created(call: HandlerCall, ticket: Ticket) -> None:
    await emit_for(call, "ticket.created", {
        "ticket_id": ticket.id, "number": ticket.number, "title": ticket.title, "kind": ticket.kind,
        "priority": ticket.priority, "status": ticket.status, "service_id": ticket.service_id,
        "requester_email": ticket.requester_email, "sla_due_at": iso(ticket.sla_due_at),
        "created_at": iso(ticket.created_at)})


async def _prepare_comment(call: HandlerCall, values: dict[str, Any], row: Any) -> dict[str, Any]:
    ticket = await _ticket(call, values["ticket_id"])
    if ticket.status in ("closed", "cancelled"):
        raise Conflict(f"ticket #{ticket.number} is {ticket.status}; reopen it to comment", code="invalid_transition")
    return {**values, "author_email": call.auth.user_email}


async def _before_service_delete(call: HandlerCall, service: Service) -> None:
    used = (await call.session.execute(select(func.count()).select_from(Ticket).where(
        Ticket.service_id == service.id))).scalar_one()
    if used:
        raise Conflict(f"service {service.name} has {used} tickets; retire it instead")


async def _before_ticket_delete(call: HandlerCall, ticket: Ticket) -> None:
    if ticket.status not in ("closed", "cancelled"):
        raise Conflict("only closed or cancelled tickets can be deleted", code="invalid_transition")


crud(app, Entity(Service, "service", "IT services", ServiceList, search=("name", "description", "owner_email"),
                 orderable=("name", "tier", "created_at"), default_ordering="name", create=ServiceCreate,
                 update=ServiceUpdate, group_by=("status", "tier", "owner_email"), before_delete=_before_service_delete,
                 ranks={"tier": TIER_RANK},
                 keywords=("service catalog", "application", "configuration item", "it service", "business service")))
crud(app, Entity(SlaPolicy, "sla_policy", "SLA policies", SlaList, search=("description",),
                 orderable=("priority", "resolve_hours"), default_ordering="priority", create=SlaCreate,
                 update=SlaUpdate, group_by=("priority",),
                 keywords=("service level", "resolution target", "response time", "resolution deadline")))
crud(app, Entity(Ticket, "ticket", "tickets", TicketList, search=("title", "description", "resolution"),
                 orderable=("number", "priority", "created_at", "updated_at", "sla_due_at"),
                 default_ordering="-number", create=TicketCreate, update=TicketUpdate,
                 group_by=("status", "priority", "kind", "service_id", "assignee_email"), prepare=_prepare_ticket,
                 after_create=_ticket_created, before_delete=_before_ticket_delete,
                 keywords=("incident", "helpdesk", "support request", "issue", "case", "trouble ticket")))
crud(app, Entity(TicketComment, "ticket_comment", "ticket comments", CommentList, search=("body",),
                 orderable=("created_at",), default_ordering="created_at", create=CommentCreate,
                 group_by=("ticket_id", "author_email", "internal"), prepare=_prepare_comment,
                 keywords=("reply", "work note", "update the requester", "comment", "remark")))


@app.handler("workflow_action", "ticket", "assign", params=TicketAssign, scope="execute",
             description="Assign (or reassign) an open ticket to an agent.",
             keywords=("take ticket", "dispatch", "reassign", "hand over", "allocate", "give to", "owner"))
async def assign_ticket(call: HandlerCall, p: TicketAssign) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    if ticket.status == "new":
        move(ticket, "assigned", TICKET_TRANSITIONS, "ticket")
    elif ticket.status not in OPEN:
        raise Conflict(f"ticket #{ticket.number} is {ticket.status} and cannot be assigned",
                       code="invalid_transition", details={"status": ticket.status})
    ticket.assignee_email = p.assignee_email
    await call.session.flush()
    return to_record(ticket)


@app.handler("workflow_action", "ticket", "start", params=TicketAction, scope="execute",
             description="Start working on an assigned ticket.", keywords=("work on ticket", "in progress"))
async def start_ticket(call: HandlerCall, p: TicketAction) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    move(ticket, "in_progress", TICKET_TRANSITIONS, "ticket")
    await call.session.flush()
    return to_record(ticket)


@app.handler("workflow_action", "ticket", "resolve", params=TicketResolve, scope="execute",
             description="Resolve an assigned or in-progress ticket with the resolution.",
             keywords=("fix", "solved", "resolution"))
async def resolve_ticket(call: HandlerCall, p: TicketResolve) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    move(ticket, "resolved", TICKET_TRANSITIONS, "ticket")
    ticket.resolution, ticket.resolved_at = p.resolution, utcnow()
    await call.session.flush()
    return to_record(ticket)


@app.handler("workflow_action", "ticket", "close", params=TicketAction, scope="execute",
             description="Close a resolved ticket.", keywords=("close ticket", "confirm resolution"))
async def close_ticket(call: HandlerCall, p: TicketAction) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    move(ticket, "closed", TICKET_TRANSITIONS, "ticket")
    ticket.closed_at = utcnow()
    await call.session.flush()
    return to_record(ticket)


@app.handler("workflow_action", "ticket", "reopen", params=TicketReason, scope="execute",
             description="Reopen a resolved ticket whose issue came back.", keywords=("not fixed", "recurring"))
async def reopen_ticket(call: HandlerCall, p: TicketReason) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    move(ticket, "in_progress", TICKET_TRANSITIONS, "ticket")
    ticket.resolved_at = None
    repo(call, TicketComment, "ticket_comment").add(ticket_id=ticket.id, author_email=call.auth.user_email,
                                                     body=f"Reopened: {p.reason}", internal=True)
    await call.session.flush()
    return to_record(ticket)


@app.handler("workflow_action", "ticket", "cancel", params=TicketReason, scope="execute", destructive=True,
             description="Cancel a ticket that needs no resolution (duplicate, raised in error).",
             keywords=("duplicate", "withdraw"))
async def cancel_ticket(call: HandlerCall, p: TicketReason) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    move(ticket, "cancelled", TICKET_TRANSITIONS, "ticket")
    ticket.resolution, ticket.closed_at = f"Cancelled: {p.reason}", utcnow()
    await call.session.flush()
    return to_record(ticket)


@app.handler("workflow_action", "ticket", "escalate", params=TicketEscalate, scope="execute",
             description="Raise an open ticket's priority; its SLA deadline follows the new priority's policy.",
             keywords=("urgent", "raise priority", "major incident"))
async def escalate_ticket(call: HandlerCall, p: TicketEscalate) -> dict[str, Any]:
    ticket = await _ticket(call, p.id)
    if ticket.status not in OPEN:
        raise Conflict(f"ticket #{ticket.number} is {ticket.status}", code="invalid_transition")
    if p.priority >= ticket.priority:  # p1 < p2 < ...: escalation means a smaller number
        raise InvalidArguments(f"priority: {p.priority} is not higher than {ticket.priority}",
                               field="priority")
    ticket.priority = p.priority
    hours = await _sla_hours(call, p.priority)
    # As for a new ticket: a priority without a policy has no deadline, rather than the old priority's.
    ticket.sla_due_at = ticket.created_at + timedelta(hours=hours) if hours else None
    await call.session.flush()
    return to_record(ticket)


@app.handler("smart_action", "ticket", "autoAssign", params=AutoAssign, scope="execute",
             permission="itsm.change_ticket",
             description="Assign new tickets, most urgent first, to the given agents, each time to the agent with "
                         "the fewest open tickets.", keywords=("round robin", "balance workload", "triage"))
async def auto_assign(call: HandlerCall, p: AutoAssign) -> dict[str, Any]:
    agents = list(dict.fromkeys(a.strip() for a in p.agents if a.strip()))
    rows = (await call.session.execute(select(Ticket.assignee_email, func.count()).where(
        Ticket.status.in_(("assigned", "in_progress")),
        Ticket.assignee_email.in_(agents)).group_by(Ticket.assignee_email))).all()
    load = dict.fromkeys(agents, 0) | {email: count for email, count in rows}
    new = (await call.session.execute(repo(call, Ticket, "ticket").base().where(Ticket.status == "new")
                                      .order_by(Ticket.priority, Ticket.number).limit(p.limit))).scalars().all()
    assigned = []
    for ticket in new:
        agent = min(agents, key=lambda a: (load[a], agents.index(a)))
        move(ticket, "assigned", TICKET_TRANSITIONS, "ticket")
        ticket.assignee_email = agent
        load[agent] += 1
        assigned.append({"ticket_id": ticket.id, "number": ticket.number, "assignee_email": agent})
    await call.session.flush()
    return {"assigned": assigned, "load": load}


@app.handler("report_query", "ticket", "slaBreaches", params=SlaReportParams, scope="read",
             permission="itsm.view_ticket",
             description="Open tickets past their SLA deadline, and those due within the next 24 hours.",
             keywords=("overdue tickets", "sla breach", "at risk"))
async def sla_breaches(call: HandlerCall, p: SlaReportParams) -> dict[str, Any]:
    now = p.as_of or utcnow()
    try:
        horizon = now + timedelta(hours=24)
    except OverflowError:  # the last day a moment can name: everything after `now` is within it
        horizon = datetime.max.replace(tzinfo=UTC)
    tickets = (await call.session.execute(repo(call, Ticket, "ticket").base().where(
        Ticket.status.in_(OPEN), Ticket.sla_due_at.is_not(None), Ticket.sla_due_at < horizon)
        .order_by(Ticket.sla_due_at, Ticket.number))).scalars().all()

    def brief(t: Ticket) -> dict[str, Any]:
        return {"id": t.id, "number": t.number, "title": t.title, "priority": t.priority,
                "assignee_email": t.assignee_email, "sla_due_at": iso(t.sla_due_at)}

    breached = [brief(t) for t in tickets if t.sla_due_at is not None and t.sla_due_at < now]
    at_risk = [brief(t) for t in tickets if t.sla_due_at is not None and t.sla_due_at >= now]
    return {"as_of": iso(now), "breached": breached, "due_within_24h": at_risk}
