from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, created_column, id_column


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = id_column()
    subdomain: Mapped[str] = mapped_column(String(63), unique=True)
    name: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = created_column()


class Organization(Base):
    __tablename__ = "organizations"
    __table_args__ = (UniqueConstraint("tenant_id", "slug"),)

    id: Mapped[str] = id_column()
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    slug: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = created_column()
    # Ledger entries older than this many days are archived and pruned by `prism audit retain`; None keeps all.
    audit_retention_days: Mapped[int | None] = mapped_column(Integer)
