"""Parameter models of the itsm app."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from prism.apps.params import ListParams, Params
from prism.kit.validation import Moment

Priority = Literal["p1", "p2", "p3", "p4"]
TicketStatus = Literal["new", "assigned", "in_progress", "resolved", "closed", "cancelled"]
Kind = Literal["incident", "request", "problem", "change"]
Tier = Literal["critical", "standard", "low"]
TIER_RANK = ("low", "standard", "critical")  # lowest first: lists ordered by tier follow it


class ServiceList(ListParams):
    status: Literal["active", "retired"] | None = Field(None, description="Only services in this state.")
    tier: Tier | None = Field(None, description="Only services of this tier.")


class ServiceCreate(Params):
    name: str = Field(..., min_length=1, max_length=255, description="Service name, unique per organization.")
    description: str = Field("", max_length=5000, description="What the service provides.")
    owner_email: str = Field("", max_length=320, description="Person accountable for the service.")
    tier: Tier = Field("standard", description="Business criticality tier.")


class ServiceUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Service id.")
    description: str | None = Field(None, max_length=5000, description="What the service provides.")
    owner_email: str | None = Field(None, max_length=320, description="Person accountable for the service.")
    tier: Tier | None = Field(None, description="Business criticality tier.")
    status: Literal["active", "retired"] | None = Field(None, description="Retire a service no longer offered.")


class SlaList(ListParams):
    priority: Priority | None = Field(None, description="Only the policy of this priority.")


class SlaCreate(Params):
    priority: Priority = Field(..., description="Ticket priority the policy applies to (one policy each).")
    resolve_hours: int = Field(..., ge=1, le=24 * 365, description="Hours allowed to resolve a ticket.")
    description: str = Field("", max_length=500, description="Notes on the commitment.")


class SlaUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="SLA policy id.")
    resolve_hours: int | None = Field(None, ge=1, le=24 * 365, description="Hours allowed to resolve a ticket.")
    description: str | None = Field(None, max_length=500, description="Notes on the commitment.")


class TicketList(ListParams):
    status: TicketStatus | None = Field(None, description="Only tickets in this state.")
    priority: Priority | None = Field(None, description="Only tickets of this priority.")
    kind: Kind | None = Field(None, description="Only incidents, requests, problems or changes.")
    service_id: str | None = Field(None, max_length=64, description="Only tickets about this service.")
    assignee_email: str | None = Field(None, max_length=320, description="Only tickets assigned to this person.")
    requester_email: str | None = Field(None, max_length=320, description="Only tickets raised by this person.")
    sla_due_at_before: Moment | None = Field(None, description="Only tickets due before this time.")


class TicketCreate(Params):
    title: str = Field(..., min_length=1, max_length=255, description="Short summary of the issue.")
    description: str = Field("", max_length=20_000, description="Details: symptoms, impact, steps.")
    kind: Kind = Field("incident", description="Incident, service request, problem or change.")
    priority: Priority = Field("p3", description="p1 (critical) to p4 (low).")
    service_id: str | None = Field(None, max_length=64, description="Affected service.")
    requester_email: str = Field("", max_length=320, description="Who raised it (default: the caller).")


class TicketUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Ticket id.")
    title: str | None = Field(None, min_length=1, max_length=255, description="Short summary of the issue.")
    description: str | None = Field(None, max_length=20_000, description="Details.")
    kind: Kind | None = Field(None, description="Incident, service request, problem or change.")
    service_id: str | None = Field(None, max_length=64, description="Affected service.")


class CommentList(ListParams):
    ticket_id: str | None = Field(None, max_length=64, description="Only comments on this ticket.")
    internal: bool | None = Field(None, description="Only internal notes (true) or public replies (false).")


class CommentCreate(Params):
    ticket_id: str = Field(..., min_length=1, max_length=64, description="Ticket commented on.")
    body: str = Field(..., min_length=1, max_length=20_000, description="Comment text.")
    internal: bool = Field(False, description="Internal work note, hidden from the requester.")


class TicketAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Ticket id.")


class TicketAssign(TicketAction):
    assignee_email: str = Field(..., min_length=3, max_length=320, description="Agent who takes the ticket.")


class TicketResolve(TicketAction):
    resolution: str = Field(..., min_length=1, max_length=20_000, description="How the issue was resolved.")


class TicketReason(TicketAction):
    reason: str = Field(..., min_length=1, max_length=2000, description="Why.")


class TicketEscalate(TicketAction):
    priority: Priority = Field(..., description="New, higher priority (p1 highest).")


class AutoAssign(Params):
    agents: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=320)]] = Field(
        ..., min_length=1, max_length=50, description="Emails of the agents to share new tickets between.")
    limit: int = Field(50, ge=1, le=500, description="At most this many new tickets are assigned.")


class SlaReportParams(Params):
    as_of: Moment | None = Field(None, description="Moment breaches are measured at (default now).")
