"""spare_parts: the inventory of maintenance spare parts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import func, select

from prism.apps import shipped_examples
from prism.apps.crud import Entity, filtered
from prism.apps.params import DeleteParams, ListParams, Params, ReadParams
from prism.apps.spare_parts.models import SparePart, StockMovement
from prism.apps.spare_parts.movements import OPENING, move_stock
from prism.errors import Conflict, InvalidArguments
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import OrgRepository, sent_changes, to_record

app = HandlerApp("spare_parts", description="Spare-parts inventory: stock levels, locations, costs.",
                 examples=shipped_examples())

Status = Literal["active", "discontinued"]
ORDERABLE = ("name", "sku", "quantity", "unit_cost_cents", "created_at", "updated_at")


class SparePartList(ListParams):
    status: Status | None = Field(None, description="Only parts with this status.")
    location: str | None = Field(None, max_length=255, description="Only parts stored here.")
    below_reorder_level: bool | None = Field(None, description="Only parts at or below reorder level.")


class SparePartCreate(Params):
    sku: str = Field(..., min_length=1, max_length=64)
    name: str = Field(..., min_length=1, max_length=255)
    description: str = Field("", max_length=5000)
    quantity: int = Field(0, ge=0, le=10_000_000)
    reorder_level: int = Field(0, ge=0, le=10_000_000)
    unit_cost_cents: int = Field(0, ge=0, le=10**12)
    location: str = Field("", max_length=255)
    status: Status = "active"


class SparePartUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64)
    name: str | None = Field(None, min_length=1, max_length=255)
    description: str | None = Field(None, max_length=5000)
    quantity: int | None = Field(None, ge=0, le=10_000_000)
    reorder_level: int | None = Field(None, ge=0, le=10_000_000)
    unit_cost_cents: int | None = Field(None, ge=0, le=10**12)
    location: str | None = Field(None, max_length=255)
    status: Status | None = None


def _below_reorder_level(low: bool) -> Any:
    at_or_below = SparePart.quantity <= SparePart.reorder_level
    return at_or_below if low else ~at_or_below


# The standard handlers of spare parts (count, breakdown ..., declared in stock.py); the list below is the app's
# own and filters through them, so list, count and breakdown take the same filters.
SPARE_PARTS = Entity(SparePart, "spare_part", "spare parts", SparePartList, search=("name", "sku", "description"),
                     orderable=ORDERABLE, default_ordering="name", deletable=False, skip=frozenset({"list", "read"}),
                     group_by=("status", "location"), sums=("quantity",),
                     filters={"below_reorder_level": _below_reorder_level},
                     keywords=("inventory", "stock", "component", "spares"))


def _repo(call: HandlerCall) -> OrgRepository[SparePart]:
    return OrgRepository(call.session, SparePart, call.organization_id, label="spare_part")


@app.handler("entity_crud", "spare_part", "list", params=SparePartList, scope="read",
             description="List spare parts with filters (status, location, low stock), search and ordering.",
             keywords=("inventory", "stock", "parts", "low stock", "reorder", "component", "spares"))
async def list_spare_parts(call: HandlerCall, p: SparePartList) -> dict[str, Any]:
    return await _repo(call).page(filtered(call, SPARE_PARTS, p), page=p.page, page_size=p.page_size,
                                  ordering=p.ordering, orderable=ORDERABLE, default_ordering="name")


@app.handler("entity_crud", "spare_part", "read", params=ReadParams, scope="read",
             description="Read one spare part by id.",
             keywords=("inventory", "part", "stock level", "component", "spares"))
async def read_spare_part(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return await _repo(call).get_record(p.id)


@app.handler("entity_crud", "spare_part", "create", params=SparePartCreate, scope="write",
             description="Add a spare part to the inventory (sku unique per organization).",
             keywords=("inventory", "add part", "new part"))
async def create_spare_part(call: HandlerCall, p: SparePartCreate) -> dict[str, Any]:
    row = _repo(call).add(**{**p.model_dump(), "quantity": 0})
    await call.session.flush()
    if p.quantity:  # the stock it starts with is its first movement, so its movements add up to its quantity
        await move_stock(call, row, OPENING, p.quantity, "spare_part/create")
    return to_record(row)


@app.handler("entity_crud", "spare_part", "update", params=SparePartUpdate, scope="write",
             description="Change fields of a spare part (location, cost, status; a new stock level is recorded as a "
                         "count adjustment, as adjustStock records it).",
             keywords=("inventory", "adjust stock", "restock"))
async def update_spare_part(call: HandlerCall, p: SparePartUpdate) -> dict[str, Any]:
    row = await _repo(call).get(p.id)
    changes = sent_changes(p, SparePart)  # null clears, absent keeps
    if not changes:
        raise InvalidArguments("nothing to update: give at least one field besides id")
    quantity = changes.pop("quantity", row.quantity)
    if quantity != row.quantity:  # a stock change like adjustStock's, so it is recorded as one
        await move_stock(call, row, "adjusted", quantity - row.quantity, "spare_part/update")
    for name, value in changes.items():
        setattr(row, name, value)
    await call.session.flush()
    return to_record(row)


@app.handler("entity_crud", "spare_part", "delete", params=DeleteParams, scope="write", destructive=True,
             description="Delete a spare part permanently (refused once its stock has moved since its creation).",
             keywords=("inventory", "remove part"))
async def delete_spare_part(call: HandlerCall, p: DeleteParams) -> dict[str, Any]:
    row = await _repo(call).get(p.id)
    moved = (await call.session.execute(select(func.count()).select_from(StockMovement).where(
        StockMovement.spare_part_id == row.id, StockMovement.kind != OPENING))).scalar_one()
    if moved:  # deleting it would delete its stock history with it (its opening stock alone is no history)
        raise Conflict(f"spare part {row.sku} has {moved} stock movements; set its status to discontinued instead")
    await call.session.delete(row)
    await call.session.flush()
    return {"id": p.id, "deleted": True}
