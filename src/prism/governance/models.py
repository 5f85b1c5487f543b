"""Governance tables: personas, AI systems, oversight requests, missions, decisions, violations.

Every table is scoped to an organization and read only through `OrgRepository`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.expression import false

from prism.models.base import Base, Int64, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Persona(OrgScoped, Base):
    """A policy object attached to keys: allow / deny / oversight patterns over coordinates."""

    __tablename__ = "personas"
    __table_args__ = (UniqueConstraint("organization_id", "name", name="uq_personas_org_name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    tenant_id: Mapped[str] = mapped_column(String(36))
    name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(Text, default="")
    allow: Mapped[list[str]] = mapped_column(JSON, default=list)
    deny: Mapped[list[str]] = mapped_column(JSON, default=list)
    oversight: Mapped[list[str]] = mapped_column(JSON, default=list)
    default_effect: Mapped[str] = mapped_column(String(8), default="deny")  # allow | deny
    cost_cap: Mapped[int | None] = mapped_column(Int64)
    oversight_priority: Mapped[str] = mapped_column(String(16), default="normal")
    oversight_sla_seconds: Mapped[int] = mapped_column(Integer, default=3600)
    # Bumped on every change: compiled matchers are cached per (id, version).
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = created_column()
    # Calls that could spend or change something must name a mission (gate.py, docs/governance.md); last, where
    # the migration that added it put it.
    require_mission: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AiSystem(OrgScoped, Base):
    """A governance record for an AI system; keys tied to one produce a decision per dispatch."""

    __tablename__ = "ai_systems"
    __table_args__ = (UniqueConstraint("organization_id", "name", name="uq_ai_systems_org_name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    tenant_id: Mapped[str] = mapped_column(String(36))
    name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(Text, default="")
    risk_level: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = created_column()


class ClientGovernance(OrgScoped, Base):
    """The persona and AI system of one OAuth client's tokens acting in one organization.

    A key belongs to one organization and carries its persona itself; an OAuth client is registered once
    for every tenant, and its tokens act in whichever organization the user consented to (or names in
    X-Organization-Context). So each organization ties a client to its own persona and AI system here.
    """

    __tablename__ = "client_governance"
    __table_args__ = (UniqueConstraint("organization_id", "client_id", name="uq_client_governance_org_client"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(36))
    client_id: Mapped[str] = mapped_column(ForeignKey("oauth_clients.client_id", ondelete="CASCADE"), index=True)
    persona_id: Mapped[str | None] = mapped_column(String(36))
    ai_system_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = created_column()


class OversightRequest(OrgScoped, Base):
    __tablename__ = "oversight_requests"
    __table_args__ = (Index("ix_oversight_requests_org_status", "organization_id", "status"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # ovr_<hex>, also the event id
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(36))
    persona_id: Mapped[str | None] = mapped_column(String(36))
    credential_id: Mapped[str] = mapped_column(String(36))
    requested_by: Mapped[str] = mapped_column(String(36))
    coordinate: Mapped[str] = mapped_column(String(255))
    arguments_digest: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # pending | approved | rejected | consumed
    priority: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    sla_deadline: Mapped[datetime] = mapped_column(UTCDateTime())
    decided_by: Mapped[str | None] = mapped_column(String(36))
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    decision_note: Mapped[str] = mapped_column(Text, default="")
    consumed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = created_column()
    # The escalated call's arguments, for the person who decides (None on requests made before they were kept;
    # last, where the migration that added it put it).
    arguments: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The mission the escalated call named (None: none), which its approval is for: it pays for the call, and the
    # person deciding sees which (last, where migration 0033 put it).
    mission_id: Mapped[str | None] = mapped_column(String(36))


class Mission(OrgScoped, Base):
    __tablename__ = "missions"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    tenant_id: Mapped[str] = mapped_column(String(36))
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="planning")
    budget_ceiling: Mapped[int] = mapped_column(Int64)
    spent: Mapped[int] = mapped_column(Int64, default=0)
    budget_exceeded_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_by: Mapped[str] = mapped_column(String(36))
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = created_column()


class GovernanceDecision(OrgScoped, Base):
    __tablename__ = "governance_decisions"
    __table_args__ = (Index("ix_governance_decisions_org_created", "organization_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # dec_<hex>, also the event id
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(36))
    ai_system_id: Mapped[str] = mapped_column(String(36), index=True)
    credential_id: Mapped[str] = mapped_column(String(36))
    coordinate: Mapped[str] = mapped_column(String(255))
    decision: Mapped[str] = mapped_column(String(8))  # ALLOW | BLOCK
    decision_type: Mapped[str] = mapped_column(String(32))
    primary_reason: Mapped[str] = mapped_column(Text)
    policies_evaluated: Mapped[int] = mapped_column(Integer)
    policies_violated: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[int] = mapped_column(Integer)
    trace_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = created_column()


class GovernanceViolation(OrgScoped, Base):
    """A violation found after the fact; unique per ledger entry and persona version (no double reports)."""

    __tablename__ = "governance_violations"
    __table_args__ = (UniqueConstraint("organization_id", "audit_entry_id", "persona_id", "persona_version",
                                       name="uq_governance_violations_entry_persona"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # vio_<hex>, also the event id
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(36))
    audit_entry_id: Mapped[int] = mapped_column(Int64)  # audit_entries.id and .seq: 64-bit
    audit_seq: Mapped[int] = mapped_column(Int64)
    persona_id: Mapped[str] = mapped_column(String(36))
    persona_version: Mapped[int] = mapped_column(Integer)
    policy_name: Mapped[str] = mapped_column(String(100))
    severity: Mapped[str] = mapped_column(String(16))
    ai_system_id: Mapped[str | None] = mapped_column(String(36))
    coordinate: Mapped[str] = mapped_column(String(255))
    reason: Mapped[str] = mapped_column(Text)
    detected_at: Mapped[datetime] = created_column()

