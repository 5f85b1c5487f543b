"""maintenance: assets, work orders (open → in_progress ⇄ on_hold → done, or cancelled), spare parts issued
to work orders from stock, preventive plans that generate work orders, and meter readings."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any, get_args

from sqlalchemy import func, select

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, dependants, repo
from prism.apps.maintenance.models import Asset, MaintenancePlan, MeterReading, WorkOrder, WorkOrderPart
from prism.apps.maintenance.params import (
    AssetAction,
    AssetCostParams,
    AssetCreate,
    AssetList,
    AssetUpdate,
    BacklogParams,
    Criticality,
    GenerateParams,
    PlanCreate,
    PlanList,
    PlanUpdate,
    Priority,
    ReadingCreate,
    ReadingList,
    ReadingUpdate,
    TrendParams,
    WorkOrderAction,
    WorkOrderCancel,
    WorkOrderComplete,
    WorkOrderCreate,
    WorkOrderList,
    WorkOrderPartCreate,
    WorkOrderPartList,
    WorkOrderUpdate,
)
from prism.apps.spare_parts.models import SparePart
from prism.apps.spare_parts.movements import move_stock
from prism.apps.states import move
from prism.apps.sums import exact_sum, storable, sum_of, total
from prism.errors import Conflict
from prism.kit.timeutil import iso, utcnow
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("maintenance", description="Maintenance: assets, work orders, parts used, preventive plans.",
                 examples=shipped_examples())

WORK_ORDER_TRANSITIONS: dict[str, frozenset[str]] = {
    "open": frozenset({"in_progress", "cancelled"}),
    "in_progress": frozenset({"on_hold", "done", "cancelled"}),
    "on_hold": frozenset({"in_progress", "cancelled"}),
    "done": frozenset(),
    "cancelled": frozenset(),
}
ASSET_TRANSITIONS: dict[str, frozenset[str]] = {
    "operational": frozenset({"down", "retired"}),
    "down": frozenset({"operational", "retired"}),
    "retired": frozenset(),
}
CLOSED = ("done", "cancelled")



async def _work_order(call: HandlerCall, work_order_id: str) -> WorkOrder:
    row: WorkOrder = await repo(call, WorkOrder, "work_order").get(work_order_id)
    return row


async def _prepare_asset_ref(call: HandlerCall, values: dict[str, Any], row: Any) -> dict[str, Any]:
    if values.get("asset_id") is not None:
        asset: Asset = await repo(call, Asset, "asset").get(values["asset_id"])
        if asset.status == "retired" and row is None:
            raise Conflict(f"asset {asset.tag} is retired")
    return values


async def _prepare_part(call: HandlerCall, values: dict[str, Any], row: Any) -> dict[str, Any]:
    order = await _work_order(call, values["work_order_id"])
    if order.status in CLOSED:
        raise Conflict(f"work order is {order.status}; parts can no longer be issued", code="invalid_transition")
    part: SparePart = await repo(call, SparePart, "spare_part").get(values["spare_part_id"])
    if part.quantity < values["quantity"]:
        raise Conflict(f"only {part.quantity} of {part.sku} in stock, {values['quantity']} requested",
                       code="insufficient_stock")
    amount = part.unit_cost_cents * values["quantity"]
    storable(order.parts_cost_cents + amount, "the work order's parts", "issue the parts to another work order")
    await move_stock(call, part, "issued", -values["quantity"], f"work order {order.id}")
    return {**values, "unit_cost_cents": part.unit_cost_cents, "amount_cents": amount}


async def _recompute_parts_cost(call: HandlerCall, line: WorkOrderPart) -> None:
    await call.session.flush()
    order = await _work_order(call, line.work_order_id)
    order.parts_cost_cents = storable(await sum_of(call.session, WorkOrderPart.amount_cents,
                                                   WorkOrderPart.work_order_id == order.id),
                                      "the work order's parts", "issue the parts to another work order")


async def _before_part_delete(call: HandlerCall, line: WorkOrderPart) -> None:
    order = await _work_order(call, line.work_order_id)
    if order.status in CLOSED:
        raise Conflict(f"work order is {order.status}; its parts are final", code="invalid_transition")
    part: SparePart = await repo(call, SparePart, "spare_part").get(line.spare_part_id)
    await move_stock(call, part, "received", line.quantity, f"returned from work order {order.id}")


async def _before_asset_delete(call: HandlerCall, asset: Asset) -> None:
    held = await dependants(call, ("work order", WorkOrder, WorkOrder.asset_id == asset.id),
                            ("maintenance plan", MaintenancePlan, MaintenancePlan.asset_id == asset.id))
    if held:  # a retired asset takes no new work and its plans generate none
        raise Conflict(f"asset {asset.tag} has {held}; retire it instead")


async def _before_plan_delete(call: HandlerCall, plan: MaintenancePlan) -> None:
    held = await dependants(call, ("work order", WorkOrder, WorkOrder.plan_id == plan.id))
    if held:
        raise Conflict(f"plan {plan.title!r} generated {held}; pause it instead (active: false)")


async def _before_work_order_delete(call: HandlerCall, order: WorkOrder) -> None:
    if order.status != "cancelled":
        raise Conflict("only cancelled work orders can be deleted", code="invalid_transition")


crud(app, Entity(Asset, "asset", "assets", AssetList, search=("tag", "name", "category", "location"),
                 orderable=("tag", "name", "criticality", "created_at"), default_ordering="tag", create=AssetCreate,
                 update=AssetUpdate, group_by=("status", "category", "location", "criticality"),
                 before_delete=_before_asset_delete, ranks={"criticality": get_args(Criticality)},
                 keywords=("equipment", "machine", "plant", "device", "vehicle")))
crud(app, Entity(WorkOrder, "work_order", "work orders", WorkOrderList, search=("title", "description"),
                 orderable=("created_at", "due_date", "priority", "updated_at"), default_ordering="-created_at",
                 create=WorkOrderCreate, update=WorkOrderUpdate,
                 group_by=("status", "priority", "kind", "asset_id", "assignee_email"),
                 sums=("labor_minutes", "parts_cost_cents"), prepare=_prepare_asset_ref,
                 before_delete=_before_work_order_delete, ranks={"priority": get_args(Priority)},
                 keywords=("repair", "job", "maintenance task", "breakdown", "maintenance job", "repair order")))
crud(app, Entity(WorkOrderPart, "work_order_part", "parts issued to work orders", WorkOrderPartList, search=(),
                 orderable=("created_at", "amount_cents"), default_ordering="created_at", create=WorkOrderPartCreate,
                 group_by=("spare_part_id", "work_order_id"), sums=("quantity", "amount_cents"),
                 prepare=_prepare_part, after_write=_recompute_parts_cost, before_delete=_before_part_delete,
                 after_delete=_recompute_parts_cost, keywords=("issue part", "consume stock", "parts used")))
crud(app, Entity(MaintenancePlan, "plan", "preventive maintenance plans", PlanList, search=("title",),
                 orderable=("next_due", "title", "created_at"), default_ordering="next_due", create=PlanCreate,
                 update=PlanUpdate, group_by=("active", "asset_id", "priority"), prepare=_prepare_asset_ref,
                 before_delete=_before_plan_delete,
                 keywords=("preventive maintenance", "schedule", "pm plan", "service schedule",
                           "recurring maintenance")))
crud(app, Entity(MeterReading, "meter_reading", "meter readings", ReadingList, search=("meter",),
                 orderable=("read_at", "value", "created_at"), default_ordering="-read_at", create=ReadingCreate,
                 update=ReadingUpdate, group_by=("meter", "asset_id"), prepare=_prepare_asset_ref,
                 keywords=("run hours", "condition monitoring", "measurement", "gauge reading", "sensor reading",
                           "odometer")))


async def _move_order(call: HandlerCall, work_order_id: str, target: str) -> WorkOrder:
    order = await _work_order(call, work_order_id)
    move(order, target, WORK_ORDER_TRANSITIONS, "work order")
    return order


@app.handler("workflow_action", "work_order", "start", params=WorkOrderAction, scope="execute",
             description="Start work on an open work order (or resume one on hold).",
             keywords=("begin repair", "in progress"))
async def start_work_order(call: HandlerCall, p: WorkOrderAction) -> dict[str, Any]:
    order = await _move_order(call, p.id, "in_progress")
    order.started_at = order.started_at or utcnow()
    await call.session.flush()
    return to_record(order)


@app.handler("workflow_action", "work_order", "hold", params=WorkOrderAction, scope="execute",
             description="Put a work order in progress on hold (waiting for parts, access ...).",
             keywords=("pause work", "waiting for parts", "on hold", "suspend"))
async def hold_work_order(call: HandlerCall, p: WorkOrderAction) -> dict[str, Any]:
    order = await _move_order(call, p.id, "on_hold")
    await call.session.flush()
    return to_record(order)


@app.handler("workflow_action", "work_order", "complete", params=WorkOrderComplete, scope="execute",
             description="Complete a work order in progress with its resolution and labour time.",
             keywords=("finish repair", "close work order", "done"))
async def complete_work_order(call: HandlerCall, p: WorkOrderComplete) -> dict[str, Any]:
    order = await _move_order(call, p.id, "done")
    order.resolution, order.labor_minutes, order.completed_at = p.resolution, p.labor_minutes, utcnow()
    await call.session.flush()
    return to_record(order)


@app.handler("workflow_action", "work_order", "cancel", params=WorkOrderCancel, scope="execute",
             destructive=True,
             description="Cancel a work order that is not finished; parts issued to it stay consumed.",
             keywords=("abort work order", "call off"))
async def cancel_work_order(call: HandlerCall, p: WorkOrderCancel) -> dict[str, Any]:
    order = await _move_order(call, p.id, "cancelled")
    order.resolution, order.completed_at = f"Cancelled: {p.reason}", utcnow()
    await call.session.flush()
    return to_record(order)


async def _move_asset(call: HandlerCall, p: AssetAction, target: str) -> dict[str, Any]:
    asset: Asset = await repo(call, Asset, "asset").get(p.id)
    move(asset, target, ASSET_TRANSITIONS, "asset")
    await call.session.flush()
    return {**to_record(asset), "note": p.note}


@app.handler("workflow_action", "asset", "markDown", params=AssetAction, scope="execute",
             description="Mark an operational asset as down (out of service).",
             keywords=("outage", "breakdown", "out of service", "broken", "unavailable", "not working"))
async def mark_asset_down(call: HandlerCall, p: AssetAction) -> dict[str, Any]:
    return await _move_asset(call, p, "down")


@app.handler("workflow_action", "asset", "markOperational", params=AssetAction, scope="execute",
             description="Return a down asset to service.",
             keywords=("back in service", "repaired", "working again", "fixed", "restore to service"))
async def mark_asset_operational(call: HandlerCall, p: AssetAction) -> dict[str, Any]:
    return await _move_asset(call, p, "operational")


@app.handler("workflow_action", "asset", "retire", params=AssetAction, scope="execute", destructive=True,
             description="Retire an asset for good (no new work orders or plans).",
             keywords=("decommission", "scrap", "dispose", "write off", "end of life"))
async def retire_asset(call: HandlerCall, p: AssetAction) -> dict[str, Any]:
    return await _move_asset(call, p, "retired")


def _next_due_after(plan: MaintenancePlan, as_of: date) -> date:
    """The plan's first due date after `as_of`, moved on by whole intervals."""
    intervals = (as_of - plan.next_due).days // plan.interval_days + 1
    try:
        return plan.next_due + timedelta(days=intervals * plan.interval_days)
    except OverflowError:
        raise Conflict(f"plan {plan.title!r} would next be due after 9999-12-31; change its next_due or "
                       "interval_days", details={"plan_id": plan.id}) from None


@app.handler("smart_action", "plan", "generateDueWorkOrders", params=GenerateParams, scope="execute",
             permission="maintenance.add_work_order",
             description="Create a preventive work order for every active plan due by the date, and move each "
                         "plan's next due date on by its interval.", keywords=("preventive", "schedule pm"))
async def generate_due_work_orders(call: HandlerCall, p: GenerateParams) -> dict[str, Any]:
    as_of = p.as_of or datetime.now(UTC).date()
    plans = (await call.session.execute(repo(call, MaintenancePlan, "plan").base().where(
        MaintenancePlan.active.is_(True), MaintenancePlan.next_due <= as_of)
        .order_by(MaintenancePlan.next_due, MaintenancePlan.id))).scalars().all()
    created = []
    for plan in plans:
        asset: Asset = await repo(call, Asset, "asset").get(plan.asset_id)
        if asset.status == "retired":
            continue
        order = repo(call, WorkOrder, "work_order").add(
            asset_id=plan.asset_id, plan_id=plan.id, title=plan.title, kind="preventive", priority=plan.priority,
            due_date=plan.next_due, description=f"Generated from plan every {plan.interval_days} days")
        plan.next_due = _next_due_after(plan, as_of)
        created.append(order)
    await call.session.flush()
    return {"as_of": as_of.isoformat(), "created": [to_record(o) for o in created], "count": len(created)}


@app.handler("report_query", "work_order", "backlog", params=BacklogParams, scope="read",
             permission="maintenance.view_work_order",
             description="Open maintenance backlog: unfinished work orders by status and priority, and the "
                         "overdue ones.", keywords=("overdue work", "open jobs", "backlog"))
async def backlog(call: HandlerCall, p: BacklogParams) -> dict[str, Any]:
    as_of = p.as_of or datetime.now(UTC).date()
    stmt = repo(call, WorkOrder, "work_order").base().where(WorkOrder.status.not_in(CLOSED))
    if p.asset_id:
        stmt = stmt.where(WorkOrder.asset_id == p.asset_id)
    orders = (await call.session.execute(stmt.order_by(WorkOrder.due_date, WorkOrder.id))).scalars().all()
    by_status: dict[str, int] = {}
    by_priority: dict[str, int] = {}
    for o in orders:
        by_status[o.status] = by_status.get(o.status, 0) + 1
        by_priority[o.priority] = by_priority.get(o.priority, 0) + 1
    overdue = [{"id": o.id, "title": o.title, "asset_id": o.asset_id, "due_date": o.due_date.isoformat(),
                "days_overdue": (as_of - o.due_date).days, "priority": o.priority}
               for o in orders if o.due_date is not None and o.due_date < as_of]
    return {"as_of": as_of.isoformat(), "open": len(orders), "by_status": by_status, "by_priority": by_priority,
            "overdue": overdue}


@app.handler("report_query", "asset", "maintenanceCost", params=AssetCostParams, scope="read",
             permission="maintenance.view_asset",
             description="Maintenance cost per asset: completed work orders, labour minutes and parts cost.",
             keywords=("cost per machine", "repair spend", "asset cost", "maintenance spend"))
async def asset_cost(call: HandlerCall, p: AssetCostParams) -> dict[str, Any]:
    stmt = (select(Asset.id, Asset.tag, Asset.name, func.count(WorkOrder.id),
                   *exact_sum(WorkOrder.labor_minutes), *exact_sum(WorkOrder.parts_cost_cents))
            .join(WorkOrder, WorkOrder.asset_id == Asset.id)
            .where(WorkOrder.status == "done")
            .group_by(Asset.id, Asset.tag, Asset.name).order_by(Asset.tag))
    if p.asset_id:
        stmt = stmt.where(Asset.id == p.asset_id)
    if p.completed_after:
        stmt = stmt.where(WorkOrder.completed_at > p.completed_after)
    rows = (await call.session.execute(stmt)).all()
    return {"assets": [{"asset_id": r[0], "tag": r[1], "name": r[2], "work_orders": r[3],
                        "labor_minutes": total(r[4], r[5]), "parts_cost_cents": total(r[6], r[7])} for r in rows]}


@app.handler("report_query", "meter_reading", "trend", params=TrendParams, scope="read",
             permission="maintenance.view_meter_reading",
             description="Condition trend per asset and meter: number of readings, minimum, maximum, average and "
                         "the latest value with its time.", keywords=("vibration trend", "run hours", "sensor"))
async def meter_trend(call: HandlerCall, p: TrendParams) -> dict[str, Any]:
    stmt = repo(call, MeterReading, "meter_reading").base()
    if p.asset_id:
        stmt = stmt.where(MeterReading.asset_id == p.asset_id)
    if p.meter:
        stmt = stmt.where(MeterReading.meter == p.meter)
    if p.read_at_after:
        stmt = stmt.where(MeterReading.read_at > p.read_at_after)
    # The database summarises every reading, so no row is brought over and none is left out: the statistics of
    # each series in one aggregate, joined to its newest reading (ties by id), in ONE statement, which sees one
    # snapshot (two could disagree about a reading written in between).
    readings = stmt.subquery()
    stats = select(readings.c.asset_id, readings.c.meter, func.count().label("readings"),
                   func.min(readings.c.value).label("low"), func.max(readings.c.value).label("high"),
                   func.avg(readings.c.value).label("average")).group_by(readings.c.asset_id,
                                                                         readings.c.meter).subquery()
    newest_first = func.row_number().over(partition_by=(readings.c.asset_id, readings.c.meter),
                                          order_by=(readings.c.read_at.desc(), readings.c.id.desc()))
    ranked = select(readings.c.asset_id, readings.c.meter, readings.c.value, readings.c.unit, readings.c.read_at,
                    newest_first.label("newest")).subquery()
    rows = await call.session.execute(
        select(stats, ranked.c.value, ranked.c.unit, ranked.c.read_at)
        .join(ranked, (ranked.c.asset_id == stats.c.asset_id) & (ranked.c.meter == stats.c.meter))
        .where(ranked.c.newest == 1))
    return {"series": [
        {"asset_id": r.asset_id, "meter": r.meter, "unit": r.unit, "readings": r.readings, "min": r.low,
         "max": r.high, "average": round(r.average, 6), "latest": r.value, "latest_at": iso(r.read_at)}
        for r in sorted(rows, key=lambda r: (r.asset_id, r.meter))]}
