"""Parameter models of the maintenance app."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import Field

from prism.apps.params import ListParams, OrderedListParams, Params
from prism.kit.validation import Moment

# Ranked words, lowest first: lists ordered by them follow this order (crud.Entity.ranks).
Priority = Literal["low", "medium", "high", "urgent"]
Criticality = Literal["low", "medium", "high"]
AssetStatus = Literal["operational", "down", "retired"]
WorkOrderStatus = Literal["open", "in_progress", "on_hold", "done", "cancelled"]
WorkOrderKind = Literal["corrective", "preventive", "inspection"]


def _id(what: str) -> Any:
    return Field(..., min_length=1, max_length=64, description=f"{what} id.")


class AssetList(ListParams):
    status: AssetStatus | None = Field(None, description="Only assets in this state.")
    category: str | None = Field(None, max_length=64, description="Only assets of this category.")
    location: str | None = Field(None, max_length=255, description="Only assets at this location.")
    criticality: Criticality | None = Field(None, description="Only assets of this criticality.")


class AssetCreate(Params):
    tag: str = Field(..., min_length=1, max_length=64, description="Asset tag, unique per organization.")
    name: str = Field(..., min_length=1, max_length=255, description="Equipment name.")
    category: str = Field("", max_length=64, description="Kind of equipment (pump, conveyor, HVAC ...).")
    location: str = Field("", max_length=255, description="Where the asset is installed.")
    criticality: Criticality = Field("medium", description="How much an outage hurts.")
    commissioned_on: date | None = Field(None, description="Date the asset went into service.")


class AssetUpdate(Params):
    id: str = _id("Asset")
    name: str | None = Field(None, min_length=1, max_length=255, description="Equipment name.")
    category: str | None = Field(None, max_length=64, description="Kind of equipment.")
    location: str | None = Field(None, max_length=255, description="Where the asset is installed.")
    criticality: Criticality | None = Field(None, description="How much an outage hurts.")
    commissioned_on: date | None = Field(None, description="Date the asset went into service.")


class WorkOrderList(ListParams):
    status: WorkOrderStatus | None = Field(None, description="Only work orders in this state.")
    asset_id: str | None = Field(None, max_length=64, description="Only work orders on this asset.")
    priority: Priority | None = Field(None, description="Only work orders of this priority.")
    kind: WorkOrderKind | None = Field(None, description="Only corrective, preventive or inspection work.")
    assignee_email: str | None = Field(None, max_length=320, description="Only work assigned to this person.")
    due_date_before: date | None = Field(None, description="Only work due before this date.")


class WorkOrderCreate(Params):
    asset_id: str = _id("Asset")
    title: str = Field(..., min_length=1, max_length=255, description="Short summary of the work.")
    description: str = Field("", max_length=10_000, description="What is wrong / what to do.")
    kind: WorkOrderKind = Field("corrective", description="Corrective, preventive or inspection.")
    priority: Priority = Field("medium", description="Urgency.")
    assignee_email: str = Field("", max_length=320, description="Technician responsible.")
    due_date: date | None = Field(None, description="Date the work should be done by.")


class WorkOrderUpdate(Params):
    id: str = _id("Work order")
    title: str | None = Field(None, min_length=1, max_length=255, description="Short summary of the work.")
    description: str | None = Field(None, max_length=10_000, description="What is wrong / what to do.")
    priority: Priority | None = Field(None, description="Urgency.")
    assignee_email: str | None = Field(None, max_length=320, description="Technician responsible.")
    due_date: date | None = Field(None, description="Date the work should be done by.")


class WorkOrderPartList(OrderedListParams):  # a part issued has no text to search
    work_order_id: str | None = Field(None, max_length=64, description="Only parts issued to this work order.")
    spare_part_id: str | None = Field(None, max_length=64, description="Only issues of this spare part.")


class WorkOrderPartCreate(Params):
    work_order_id: str = _id("Work order")
    spare_part_id: str = _id("Spare part")
    quantity: int = Field(..., ge=1, le=100_000, description="Units taken from stock.")


class PlanList(ListParams):
    asset_id: str | None = Field(None, max_length=64, description="Only plans of this asset.")
    active: bool | None = Field(None, description="Only active (or paused) plans.")
    next_due_before: date | None = Field(None, description="Only plans due before this date.")


class PlanCreate(Params):
    asset_id: str = _id("Asset")
    title: str = Field(..., min_length=1, max_length=255, description="Preventive task, e.g. 'Grease bearings'.")
    interval_days: int = Field(..., ge=1, le=3650, description="Days between two work orders.")
    next_due: date = Field(..., description="Date the next work order is due.")
    priority: Priority = Field("medium", description="Priority of generated work orders.")


class PlanUpdate(Params):
    id: str = _id("Plan")
    title: str | None = Field(None, min_length=1, max_length=255, description="Preventive task.")
    interval_days: int | None = Field(None, ge=1, le=3650, description="Days between two work orders.")
    next_due: date | None = Field(None, description="Date the next work order is due.")
    priority: Priority | None = Field(None, description="Priority of generated work orders.")
    active: bool | None = Field(None, description="Pause (false) or resume (true) the plan.")


class ReadingList(ListParams):
    asset_id: str | None = Field(None, max_length=64, description="Only readings of this asset.")
    meter: str | None = Field(None, max_length=64, description="Only this meter (hours, temperature ...).")
    read_at_after: Moment | None = Field(None, description="Only readings taken after this time.")


class ReadingCreate(Params):
    asset_id: str = _id("Asset")
    meter: str = Field(..., min_length=1, max_length=64, description="Meter name (run_hours, vibration_mm_s ...).")
    value: float = Field(..., ge=-1e12, le=1e12, description="Measured value.")
    unit: str = Field("", max_length=16, description="Unit of the value.")
    read_at: Moment = Field(..., description="When the reading was taken (ISO 8601 with zone).")


class ReadingUpdate(Params):
    id: str = _id("Reading")
    value: float | None = Field(None, ge=-1e12, le=1e12, description="Measured value (corrections).")
    unit: str | None = Field(None, max_length=16, description="Unit of the value.")


class WorkOrderAction(Params):
    id: str = _id("Work order")


class WorkOrderComplete(WorkOrderAction):
    resolution: str = Field(..., min_length=1, max_length=10_000, description="What was done.")
    labor_minutes: int = Field(0, ge=0, le=100_000, description="Labour time spent, in minutes.")


class WorkOrderCancel(WorkOrderAction):
    reason: str = Field(..., min_length=1, max_length=1000, description="Why the work is cancelled.")


class AssetAction(Params):
    id: str = _id("Asset")
    note: str = Field("", max_length=1000, description="Why the status changes.")


class GenerateParams(Params):
    as_of: date | None = Field(None, description="Generate for plans due on or before this date (default today).")


class BacklogParams(Params):
    as_of: date | None = Field(None, description="Date overdue work is measured at (default today).")
    asset_id: str | None = Field(None, max_length=64, description="Only this asset.")


class AssetCostParams(Params):
    asset_id: str | None = Field(None, max_length=64, description="Only this asset.")
    completed_after: Moment | None = Field(None, description="Only work completed after this time.")


class TrendParams(Params):
    asset_id: str | None = Field(None, max_length=64, description="Only this asset's meters.")
    meter: str | None = Field(None, max_length=64, description="Only this meter.")
    read_at_after: Moment | None = Field(None, description="Only readings taken after this time.")
