"""spare_parts, continued: stock movements (receive, issue, count adjustments) and the reorder report.

Every change of stock through these handlers leaves a movement row with the quantity after it, so a
part's stock history can be audited; stock never goes below zero.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import func, select

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, repo
from prism.apps.params import ListParams, Params
from prism.apps.spare_parts.handlers import SPARE_PARTS
from prism.apps.spare_parts.models import SparePart, StockMovement
from prism.apps.spare_parts.movements import move_stock
from prism.apps.sums import exact_sum, fitted, joined
from prism.errors import Conflict
from prism.kit.validation import Moment
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("spare_parts", description="Spare-parts inventory: stock levels, locations, costs.",
                 examples=shipped_examples())

Kind = Literal["opening", "received", "issued", "adjusted"]


class MovementList(ListParams):
    spare_part_id: str | None = Field(None, max_length=64, description="Only movements of this part.")
    kind: Kind | None = Field(None, description="Only opening stock, receipts, issues or count adjustments.")


class Receive(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Spare part id.")
    quantity: int = Field(..., ge=1, le=10_000_000, description="Units received into stock.")
    reference: str = Field("", max_length=255, description="Delivery note or purchase order.")


class Issue(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Spare part id.")
    quantity: int = Field(..., ge=1, le=10_000_000, description="Units taken out of stock.")
    reference: str = Field("", max_length=255, description="What the parts were used for.")


class Adjust(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Spare part id.")
    counted_quantity: int = Field(..., ge=0, le=10_000_000, description="Units found by a physical count.")
    reference: str = Field("", max_length=255, description="Count sheet or reason of the correction.")


class UsageParams(Params):
    after: Moment | None = Field(None, description="Only movements after this time.")
    before: Moment | None = Field(None, description="Only movements before this time.")
    top: int = Field(20, ge=1, le=500, description="How many of the most used parts to return.")


class ReorderParams(Params):
    location: str | None = Field(None, max_length=255, description="Only parts stored here.")



crud(app, Entity(StockMovement, "stock_movement", "stock movements", MovementList, search=("reference",),
                 orderable=("created_at", "quantity_change"), default_ordering="-created_at", deletable=False,
                 group_by=("kind", "spare_part_id"), sums=("quantity_change",),
                 keywords=("stock history", "inventory ledger", "goods receipt", "stock transaction")))
crud(app, SPARE_PARTS)


async def _record(call: HandlerCall, part: SparePart, kind: str, change: int, reference: str) -> dict[str, Any]:
    movement = await move_stock(call, part, kind, change, reference)
    return {"spare_part": to_record(part), "movement": to_record(movement)}


@app.handler("workflow_action", "spare_part", "receiveStock", params=Receive, scope="execute",
             description="Receive units of a spare part into stock (goods receipt).",
             keywords=("restock", "delivery arrived", "goods receipt"))
async def receive_stock(call: HandlerCall, p: Receive) -> dict[str, Any]:
    part: SparePart = await repo(call, SparePart, "spare_part").get(p.id)
    return await _record(call, part, "received", p.quantity, p.reference)


@app.handler("workflow_action", "spare_part", "issueStock", params=Issue, scope="execute",
             description="Take units of a spare part out of stock; refused beyond the quantity on hand.",
             keywords=("consume part", "withdraw stock", "use part"))
async def issue_stock(call: HandlerCall, p: Issue) -> dict[str, Any]:
    part: SparePart = await repo(call, SparePart, "spare_part").get(p.id)
    if p.quantity > part.quantity:
        raise Conflict(f"only {part.quantity} of {part.sku} in stock, {p.quantity} requested",
                       code="insufficient_stock", details={"on_hand": part.quantity})
    return await _record(call, part, "issued", -p.quantity, p.reference)


@app.handler("workflow_action", "spare_part", "adjustStock", params=Adjust, scope="execute",
             description="Correct a part's stock to a physical count; the difference is recorded.",
             keywords=("stocktake", "inventory count", "cycle count"))
async def adjust_stock(call: HandlerCall, p: Adjust) -> dict[str, Any]:
    part: SparePart = await repo(call, SparePart, "spare_part").get(p.id)
    return await _record(call, part, "adjusted", p.counted_quantity - part.quantity, p.reference)


@app.handler("report_query", "spare_part", "reorderReport", params=ReorderParams, scope="read",
             permission="spare_parts.view_spare_part",
             description="Active parts at or below their reorder level, with a suggested order quantity (back to "
                         "twice the reorder level) and its cost.",
             keywords=("what to order", "reorder", "purchasing"))
async def reorder_report(call: HandlerCall, p: ReorderParams) -> dict[str, Any]:
    stmt = repo(call, SparePart, "spare_part").base().where(
        SparePart.status == "active", SparePart.quantity <= SparePart.reorder_level)
    if p.location:
        stmt = stmt.where(SparePart.location == p.location)
    parts = (await call.session.execute(stmt.order_by(SparePart.sku))).scalars().all()
    lines = []
    for part in parts:
        order = max(part.reorder_level * 2 - part.quantity, 1)
        lines.append({"spare_part_id": part.id, "sku": part.sku, "name": part.name, "quantity": part.quantity,
                      "reorder_level": part.reorder_level, "suggested_order": order,
                      "estimated_cost_cents": order * part.unit_cost_cents})
    whole = sum(x["estimated_cost_cents"] for x in lines)
    return {"parts": [{**x, "estimated_cost_cents": fitted(x["estimated_cost_cents"])} for x in lines],
            "estimated_total_cents": fitted(whole)}


@app.handler("report_query", "stock_movement", "usage", params=UsageParams, scope="read",
             permission="spare_parts.view_stock_movement",
             description="Parts consumption: units issued per spare part over a period, most used first, with the "
                         "number of issues and units received.",
             keywords=("consumption", "most used parts", "burn rate"))
async def usage(call: HandlerCall, p: UsageParams) -> dict[str, Any]:
    issued = exact_sum(StockMovement.quantity_change, where=StockMovement.kind == "issued")  # negative changes
    received = exact_sum(StockMovement.quantity_change, where=StockMovement.kind == "received")
    stmt = (select(SparePart.id, SparePart.sku, SparePart.name, *issued,
                   func.count().filter(StockMovement.kind == "issued"), *received)
            .join(SparePart, SparePart.id == StockMovement.spare_part_id)
            .group_by(SparePart.id, SparePart.sku, SparePart.name))
    if p.after:
        stmt = stmt.where(StockMovement.created_at > p.after)
    if p.before:
        stmt = stmt.where(StockMovement.created_at < p.before)
    rows = [(*r[:3], -joined(r[3], r[4]), int(r[5]), joined(r[6], r[7])) for r in await call.session.execute(stmt)]
    rows.sort(key=lambda r: (-r[3], r[1]))
    return {"parts": [{"spare_part_id": r[0], "sku": r[1], "name": r[2], "units_issued": fitted(r[3]),
                       "issues": r[4], "units_received": fitted(r[5])} for r in rows[: p.top]]}
