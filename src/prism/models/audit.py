from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime
from prism.tenancy.scope import OrgScoped


class AuditHead(OrgScoped, Base):
    """The tip of one organization's chain. Appenders lock this row, so two processes never fork it."""

    __tablename__ = "audit_heads"

    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(BigInteger, default=0)
    hash: Mapped[str] = mapped_column(String(64))


class AuditEntry(OrgScoped, Base):
    """One dispatch, allowed or refused. `hash = sha256(prev_hash ‖ canonical JSON of the entry)`."""

    __tablename__ = "audit_entries"
    __table_args__ = (UniqueConstraint("organization_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    tenant_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    actor_user_id: Mapped[str | None] = mapped_column(String(36))
    credential_id: Mapped[str | None] = mapped_column(String(36))
    door: Mapped[str] = mapped_column(String(32))
    tool_name: Mapped[str] = mapped_column(String(64))
    coordinate: Mapped[str] = mapped_column(String(255))
    arguments_digest: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[dict[str, object]] = mapped_column(JSON, default=dict)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
