from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import Boolean, Date, Float, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status, updated_column
from prism.models.base import Base, Int64, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Asset(OrgScoped, Base):
    __tablename__ = "maintenance_assets"
    __table_args__ = (UniqueConstraint("organization_id", "tag"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    tag: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255))
    category: Mapped[str] = mapped_column(String(64), default="")
    location: Mapped[str] = mapped_column(String(255), default="")
    criticality: Mapped[str] = mapped_column(String(16), default="medium")
    status: Mapped[str] = status("operational")
    commissioned_on: Mapped[date | None] = mapped_column(Date, nullable=True)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class WorkOrder(OrgScoped, Base):
    __tablename__ = "maintenance_work_orders"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    asset_id: Mapped[str] = ref("maintenance_assets.id")
    plan_id: Mapped[str | None] = ref("maintenance_plans.id", nullable=True)
    title: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[str] = mapped_column(String(16), default="corrective")
    priority: Mapped[str] = mapped_column(String(16), default="medium")
    status: Mapped[str] = status("open")
    assignee_email: Mapped[str] = mapped_column(String(320), default="")
    due_date: Mapped[date | None] = mapped_column(Date, nullable=True)
    resolution: Mapped[str] = mapped_column(Text, default="")
    labor_minutes: Mapped[int] = mapped_column(Integer, default=0)
    parts_cost_cents: Mapped[int] = mapped_column(Int64, default=0)
    started_at: Mapped[datetime | None] = moment()
    completed_at: Mapped[datetime | None] = moment()
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class WorkOrderPart(OrgScoped, Base):
    """A spare part issued from stock to a work order (stock goes down; deleting the line returns it)."""

    __tablename__ = "maintenance_wo_parts"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    work_order_id: Mapped[str] = ref("maintenance_work_orders.id", cascade=True)
    spare_part_id: Mapped[str] = ref("spare_parts.id")
    quantity: Mapped[int] = mapped_column(Integer)
    unit_cost_cents: Mapped[int] = mapped_column(Int64)
    amount_cents: Mapped[int] = mapped_column(Int64)
    created_at: Mapped[datetime] = created_column()


class MaintenancePlan(OrgScoped, Base):
    """Preventive maintenance: a work order every interval_days, generated when next_due arrives."""

    __tablename__ = "maintenance_plans"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    asset_id: Mapped[str] = ref("maintenance_assets.id")
    title: Mapped[str] = mapped_column(String(255))
    interval_days: Mapped[int] = mapped_column(Integer)
    next_due: Mapped[date] = mapped_column(Date)
    priority: Mapped[str] = mapped_column(String(16), default="medium")
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = created_column()


class MeterReading(OrgScoped, Base):
    __tablename__ = "maintenance_meter_readings"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    asset_id: Mapped[str] = ref("maintenance_assets.id", cascade=True)
    meter: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(16), default="")
    read_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = created_column()
