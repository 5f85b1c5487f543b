from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status, updated_column
from prism.models.base import Base, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Agent(OrgScoped, Base):
    """An agent definition: what model runs it, with which instructions and step limit."""

    __tablename__ = "agents_agents"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    model: Mapped[str] = mapped_column(String(128), default="")
    instructions: Mapped[str] = mapped_column(Text, default="")
    max_steps: Mapped[int] = mapped_column(Integer, default=50)
    status: Mapped[str] = status("active")
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class AgentInstance(OrgScoped, Base):
    """One run of an agent on a task: spawned → running → completed | failed, or cancelled."""

    __tablename__ = "agents_instances"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    agent_id: Mapped[str] = ref("agents_agents.id")
    task: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = status("spawned")
    step_count: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str] = mapped_column(Text, default="")
    spawned_by: Mapped[str] = mapped_column(String(320), default="")
    started_at: Mapped[datetime | None] = moment()
    ended_at: Mapped[datetime | None] = moment()
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class AgentStep(OrgScoped, Base):
    """What a running instance did, in order (thoughts, tool calls, observations, messages)."""

    __tablename__ = "agents_steps"
    __table_args__ = (UniqueConstraint("instance_id", "seq"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    instance_id: Mapped[str] = ref("agents_instances.id", cascade=True)
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()
