from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import Date, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status, updated_column
from prism.models.base import Base, Int64, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Payer(OrgScoped, Base):
    __tablename__ = "claims_payers"
    __table_args__ = (UniqueConstraint("organization_id", "code"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    code: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32), default="commercial")
    contact_email: Mapped[str] = mapped_column(String(320), default="")
    status: Mapped[str] = status("active")
    created_at: Mapped[datetime] = created_column()


class Patient(OrgScoped, Base):
    __tablename__ = "claims_patients"
    __table_args__ = (UniqueConstraint("organization_id", "member_id"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    member_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255))
    birth_date: Mapped[date | None] = mapped_column(Date, nullable=True)
    payer_id: Mapped[str | None] = ref("claims_payers.id", nullable=True)
    status: Mapped[str] = status("active")
    created_at: Mapped[datetime] = created_column()


class Claim(OrgScoped, Base):
    __tablename__ = "claims_claims"
    __table_args__ = (UniqueConstraint("organization_id", "number"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    number: Mapped[str] = mapped_column(String(64))
    payer_id: Mapped[str] = ref("claims_payers.id")
    patient_id: Mapped[str] = ref("claims_patients.id")
    service_date: Mapped[date] = mapped_column(Date)
    currency: Mapped[str] = mapped_column(String(3), default="USD")
    billed_cents: Mapped[int] = mapped_column(Int64, default=0)
    approved_cents: Mapped[int] = mapped_column(Int64, default=0)
    paid_cents: Mapped[int] = mapped_column(Int64, default=0)
    status: Mapped[str] = status("draft")
    denial_reason: Mapped[str] = mapped_column(String(1000), default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    submitted_at: Mapped[datetime | None] = moment()
    decided_at: Mapped[datetime | None] = moment()
    paid_at: Mapped[datetime | None] = moment()
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class ClaimLine(OrgScoped, Base):
    __tablename__ = "claims_claim_lines"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    claim_id: Mapped[str] = ref("claims_claims.id", cascade=True)
    procedure_code: Mapped[str] = mapped_column(String(32))
    description: Mapped[str] = mapped_column(String(500), default="")
    quantity: Mapped[int] = mapped_column(Integer, default=1)
    unit_price_cents: Mapped[int] = mapped_column(Int64)
    amount_cents: Mapped[int] = mapped_column(Int64)
    created_at: Mapped[datetime] = created_column()
