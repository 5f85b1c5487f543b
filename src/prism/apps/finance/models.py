from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import Date, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.kit.timeutil import utcnow
from prism.models.base import Base, Int64, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Vendor(OrgScoped, Base):
    __tablename__ = "finance_vendors"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(255))
    email: Mapped[str] = mapped_column(String(320), default="")
    payment_terms_days: Mapped[int] = mapped_column(Integer, default=30)
    status: Mapped[str] = mapped_column(String(32), default="active")
    created_at: Mapped[datetime] = created_column()


class Invoice(OrgScoped, Base):
    __tablename__ = "finance_invoices"
    __table_args__ = (UniqueConstraint("organization_id", "vendor_id", "number"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    vendor_id: Mapped[str] = mapped_column(ForeignKey("finance_vendors.id"), index=True)
    number: Mapped[str] = mapped_column(String(64))
    amount_cents: Mapped[int] = mapped_column(Int64)
    currency: Mapped[str] = mapped_column(String(3), default="USD")
    issue_date: Mapped[date] = mapped_column(Date)
    due_date: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(32), default="received")
    memo: Mapped[str] = mapped_column(String(1000), default="")
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class Payment(OrgScoped, Base):
    """Money paid to a vendor against one invoice; several partial payments may settle an invoice."""

    __tablename__ = "finance_payments"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    invoice_id: Mapped[str] = mapped_column(ForeignKey("finance_invoices.id"), index=True)
    vendor_id: Mapped[str] = mapped_column(ForeignKey("finance_vendors.id"), index=True)
    amount_cents: Mapped[int] = mapped_column(Int64)
    currency: Mapped[str] = mapped_column(String(3))
    paid_on: Mapped[date] = mapped_column(Date)
    method: Mapped[str] = mapped_column(String(16), default="ach")
    reference: Mapped[str] = mapped_column(String(128), default="")
    status: Mapped[str] = mapped_column(String(32), default="recorded", index=True)
    void_reason: Mapped[str] = mapped_column(String(1000), default="")
    created_at: Mapped[datetime] = created_column()


class PurchaseOrder(OrgScoped, Base):
    """An order placed with a vendor: draft → approved → received → closed, or cancelled before receipt."""

    __tablename__ = "finance_purchase_orders"
    __table_args__ = (UniqueConstraint("organization_id", "number"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    vendor_id: Mapped[str] = mapped_column(ForeignKey("finance_vendors.id"), index=True)
    number: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(String(1000), default="")
    amount_cents: Mapped[int] = mapped_column(Int64)
    currency: Mapped[str] = mapped_column(String(3), default="USD")
    expected_on: Mapped[date | None] = mapped_column(Date, nullable=True)
    status: Mapped[str] = mapped_column(String(32), default="draft", index=True)
    approved_by: Mapped[str] = mapped_column(String(320), default="")
    received_on: Mapped[date | None] = mapped_column(Date, nullable=True)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
