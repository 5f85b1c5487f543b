"""Webhook endpoints and their delivery records (SPEC.md "Webhook", "Webhook delivery record")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime, created_column
from prism.tenancy.scope import OrgScoped


class Webhook(OrgScoped, Base):
    """A receiver of an organization's events.

    `sealed` holds the signing secret and the custom headers (which often carry an Authorization value),
    encrypted with a key derived from the master secret: Prism must sign with the secret, so it cannot keep
    only a hash, but the database never holds it in plaintext.
    """

    __tablename__ = "webhooks"
    __table_args__ = (Index("ix_webhooks_org_active", "organization_id", "is_active"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tenant_id: Mapped[str] = mapped_column(String(36))
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSON)
    filters: Mapped[dict[str, Any]] = mapped_column(JSON)
    header_names: Mapped[list[str]] = mapped_column(JSON)  # shown in reads; the values stay sealed
    sealed: Mapped[str] = mapped_column(Text)
    max_retries: Mapped[int] = mapped_column(Integer)
    retry_delay_seconds: Mapped[int] = mapped_column(Integer)
    timeout_seconds: Mapped[int] = mapped_column(Integer)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Why Prism switched the webhook off by itself (410 Gone, too many failed deliveries); null otherwise.
    deactivated_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = created_column()


class WebhookDelivery(OrgScoped, Base):
    """One event for one webhook. `due_at` is when a worker should try next (null once final);
    `claimed_until` is the lease of the worker trying it now."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_webhook_created", "webhook_id", "created_at"),
        Index("ix_webhook_deliveries_due", "due_at"),
        # An organization's deliveries (its foreign key: deleting an organization).
        Index("ix_webhook_deliveries_org_due", "organization_id", "due_at"),
        # A claim's reads (claim_order): the organizations with deliveries pending and each one's oldest due
        # deliveries (not final deliveries, most of the table), and the deliveries in flight.
        Index("ix_webhook_deliveries_pending", "organization_id", "due_at", sqlite_where=text("due_at IS NOT NULL"),
              postgresql_where=text("due_at IS NOT NULL")),
        Index("ix_webhook_deliveries_leased", "claimed_until", sqlite_where=text("claimed_until IS NOT NULL"),
              postgresql_where=text("claimed_until IS NOT NULL")),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    webhook_id: Mapped[str] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(ForeignKey("event_outbox.id", ondelete="CASCADE"))
    event_type: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    attempt_count: Mapped[int] = mapped_column(Integer, default=0)
    response_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response_body: Mapped[str] = mapped_column(Text, default="")
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    is_test: Mapped[bool] = mapped_column(Boolean, default=False)
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    claimed_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = created_column()
