from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime
from prism.tenancy.scope import OrgScoped


class OutboxEvent(OrgScoped, Base):
    """One event, written in the same transaction as the change that caused it.

    `payload` holds the exact envelope bytes that receivers get (sorted keys, compact separators), so
    the signature a webhook worker computes later covers precisely what was recorded here.
    """

    __tablename__ = "event_outbox"
    __table_args__ = (Index("ix_event_outbox_org_created", "organization_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # the envelope's event_id
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(36))
    event_type: Mapped[str] = mapped_column(String(64), index=True)
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
