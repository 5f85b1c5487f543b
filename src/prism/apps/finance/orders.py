"""finance, continued: purchase orders placed with vendors.

States: draft → approved → received → closed; draft/approved → cancelled. Only drafts change or are
deleted; approving records who approved; receiving records the date goods arrived.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import Field

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, repo
from prism.apps.finance.models import PurchaseOrder, Vendor
from prism.apps.params import ListParams, Params
from prism.apps.states import move
from prism.errors import Conflict
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("finance", description="Accounts payable: vendors, purchase orders, invoices, payments, aging.",
                 examples=shipped_examples())

ORDER_TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"approved", "cancelled"}),
    "approved": frozenset({"received", "cancelled"}),
    "received": frozenset({"closed"}),
    "closed": frozenset(),
    "cancelled": frozenset(),
}


class OrderList(ListParams):
    status: Literal["draft", "approved", "received", "closed", "cancelled"] | None = Field(
        None, description="Only purchase orders in this state.")
    vendor_id: str | None = Field(None, max_length=64, description="Only orders placed with this vendor.")
    expected_on_before: date | None = Field(None, description="Only orders expected before this date.")


class OrderCreate(Params):
    vendor_id: str = Field(..., min_length=1, max_length=64, description="Vendor the order is placed with.")
    number: str = Field(..., min_length=1, max_length=64, description="PO number, unique per organization.")
    description: str = Field("", max_length=1000, description="What is ordered.")
    amount_cents: int = Field(..., gt=0, le=10**12, description="Order total in cents.")
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 currency code.")
    expected_on: date | None = Field(None, description="Date the goods are expected.")


class OrderUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Purchase order id.")
    description: str | None = Field(None, max_length=1000, description="What is ordered (drafts only).")
    amount_cents: int | None = Field(None, gt=0, le=10**12, description="Order total in cents (drafts only).")
    expected_on: date | None = Field(None, description="Date the goods are expected (drafts only).")


class OrderAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Purchase order id.")


class OrderReceive(OrderAction):
    received_on: date | None = Field(None, description="Date the goods arrived (default today).")



async def _prepare(call: HandlerCall, values: dict[str, Any], row: PurchaseOrder | None) -> dict[str, Any]:
    if row is not None and row.status != "draft":
        raise Conflict(f"purchase order {row.number} is {row.status}; only drafts change", code="invalid_transition")
    if values.get("vendor_id") is not None:
        vendor: Vendor = await repo(call, Vendor, "vendor").get(values["vendor_id"])
        if vendor.status != "active":
            raise Conflict(f"vendor {vendor.name} is inactive")
    return values


async def _before_delete(call: HandlerCall, order: PurchaseOrder) -> None:
    if order.status not in ("draft", "cancelled"):
        raise Conflict(f"purchase order {order.number} is {order.status}; only drafts or cancelled orders are "
                       "deleted", code="invalid_transition")


crud(app, Entity(PurchaseOrder, "purchase_order", "purchase orders", OrderList, search=("number", "description"),
                 orderable=("number", "amount_cents", "expected_on", "created_at"), default_ordering="-created_at",
                 create=OrderCreate, update=OrderUpdate, group_by=("status", "vendor_id", "currency"),
                 sums=("amount_cents",), prepare=_prepare, before_delete=_before_delete,
                 keywords=("po", "procurement", "order from supplier", "purchasing", "purchase", "requisition")))


async def _move(call: HandlerCall, order_id: str, target: str) -> PurchaseOrder:
    order: PurchaseOrder = await repo(call, PurchaseOrder, "purchase_order").get(order_id)
    move(order, target, ORDER_TRANSITIONS, "purchase order")
    return order


@app.handler("workflow_action", "purchase_order", "approve", params=OrderAction, scope="execute",
             description="Approve a draft purchase order so it can be sent to the vendor.",
             keywords=("approve po", "authorize purchase"))
async def approve_order(call: HandlerCall, p: OrderAction) -> dict[str, Any]:
    order = await _move(call, p.id, "approved")
    order.approved_by = call.auth.user_email
    await call.session.flush()
    return to_record(order)


@app.handler("workflow_action", "purchase_order", "receive", params=OrderReceive, scope="execute",
             description="Record that the goods of an approved purchase order arrived.",
             keywords=("goods received", "delivery arrived"))
async def receive_order(call: HandlerCall, p: OrderReceive) -> dict[str, Any]:
    order = await _move(call, p.id, "received")
    order.received_on = p.received_on or datetime.now(UTC).date()
    await call.session.flush()
    return to_record(order)


@app.handler("workflow_action", "purchase_order", "close", params=OrderAction, scope="execute",
             description="Close a received purchase order (invoiced and settled).", keywords=("complete po",))
async def close_order(call: HandlerCall, p: OrderAction) -> dict[str, Any]:
    order = await _move(call, p.id, "closed")
    await call.session.flush()
    return to_record(order)


@app.handler("workflow_action", "purchase_order", "cancel", params=OrderAction, scope="execute",
             destructive=True,
             description="Cancel a purchase order before its goods are received.", keywords=("cancel po",))
async def cancel_order(call: HandlerCall, p: OrderAction) -> dict[str, Any]:
    order = await _move(call, p.id, "cancelled")
    await call.session.flush()
    return to_record(order)
