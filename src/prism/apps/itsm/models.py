from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status, updated_column
from prism.models.base import Base, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Service(OrgScoped, Base):
    """A business service tickets are raised against (email, VPN, ERP ...)."""

    __tablename__ = "itsm_services"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    owner_email: Mapped[str] = mapped_column(String(320), default="")
    tier: Mapped[str] = mapped_column(String(16), default="standard")
    status: Mapped[str] = status("active")
    created_at: Mapped[datetime] = created_column()


class SlaPolicy(OrgScoped, Base):
    """Hours to resolve a ticket of one priority; a new ticket's sla_due_at comes from here."""

    __tablename__ = "itsm_sla_policies"
    __table_args__ = (UniqueConstraint("organization_id", "priority"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    priority: Mapped[str] = mapped_column(String(8))
    resolve_hours: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[datetime] = created_column()


class Ticket(OrgScoped, Base):
    __tablename__ = "itsm_tickets"
    __table_args__ = (UniqueConstraint("organization_id", "number"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    number: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[str] = mapped_column(String(16), default="incident")
    priority: Mapped[str] = mapped_column(String(8), default="p3")
    status: Mapped[str] = status("new")
    service_id: Mapped[str | None] = ref("itsm_services.id", nullable=True)
    requester_email: Mapped[str] = mapped_column(String(320), default="")
    assignee_email: Mapped[str] = mapped_column(String(320), default="", index=True)
    resolution: Mapped[str] = mapped_column(Text, default="")
    sla_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    resolved_at: Mapped[datetime | None] = moment()
    closed_at: Mapped[datetime | None] = moment()
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class TicketCounter(OrgScoped, Base):
    """The last ticket number an organization gave out. Numbers are counted here rather than read off the tickets
    that remain, so that a deleted ticket's number is never given to another ticket."""

    __tablename__ = "itsm_ticket_counters"

    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"),
                                                 primary_key=True)
    last_number: Mapped[int] = mapped_column(Integer)


class TicketComment(OrgScoped, Base):
    __tablename__ = "itsm_ticket_comments"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    ticket_id: Mapped[str] = ref("itsm_tickets.id", cascade=True)
    author_email: Mapped[str] = mapped_column(String(320), default="")
    body: Mapped[str] = mapped_column(Text)
    internal: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = created_column()
