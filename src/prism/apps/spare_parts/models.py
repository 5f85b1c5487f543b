from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.kit.timeutil import utcnow
from prism.models.base import Base, Int64, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class SparePart(OrgScoped, Base):
    __tablename__ = "spare_parts"
    __table_args__ = (UniqueConstraint("organization_id", "sku"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    sku: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    quantity: Mapped[int] = mapped_column(Integer, default=0)
    reorder_level: Mapped[int] = mapped_column(Integer, default=0)
    unit_cost_cents: Mapped[int] = mapped_column(Int64, default=0)
    location: Mapped[str] = mapped_column(String(255), default="")
    status: Mapped[str] = mapped_column(String(32), default="active")
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class StockMovement(OrgScoped, Base):
    """One change of a part's stock: the stock it was created with (+), received (+), issued (-) or a count
    adjustment (±)."""

    __tablename__ = "spare_parts_stock_movements"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    spare_part_id: Mapped[str] = mapped_column(ForeignKey("spare_parts.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    quantity_change: Mapped[int] = mapped_column(Integer)
    quantity_after: Mapped[int] = mapped_column(Integer)
    reference: Mapped[str] = mapped_column(String(255), default="")
    actor_email: Mapped[str] = mapped_column(String(320), default="")
    created_at: Mapped[datetime] = created_column()
