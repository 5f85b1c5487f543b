from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status
from prism.models.base import Base, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Channel(OrgScoped, Base):
    __tablename__ = "notifications_channels"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    name: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16), default="in_app")
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = status("active")
    created_at: Mapped[datetime] = created_column()


class Template(OrgScoped, Base):
    __tablename__ = "notifications_templates"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    name: Mapped[str] = mapped_column(String(255))
    subject: Mapped[str] = mapped_column(String(500))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = status("active")
    created_at: Mapped[datetime] = created_column()


class Notification(OrgScoped, Base):
    """A message to one user (recipient_user_id) or to a channel (channel_id); exactly one is set."""

    __tablename__ = "notifications_items"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    recipient_user_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    recipient_email: Mapped[str] = mapped_column(String(320), default="")
    channel_id: Mapped[str | None] = ref("notifications_channels.id", nullable=True)
    template_id: Mapped[str | None] = ref("notifications_templates.id", nullable=True)
    subject: Mapped[str] = mapped_column(String(500))
    body: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[str] = mapped_column(String(16), default="normal")
    status: Mapped[str] = status("unread")
    sender_user_id: Mapped[str] = mapped_column(String(36), default="")
    read_at: Mapped[datetime | None] = moment()
    created_at: Mapped[datetime] = created_column()
