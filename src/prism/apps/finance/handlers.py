"""finance: accounts payable — vendors, their invoices, and the AP aging report."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import Field, model_validator
from sqlalchemy import select

from prism.apps import shipped_examples
from prism.apps.crud import Entity, filtered
from prism.apps.finance.aging import aging_summary
from prism.apps.finance.models import Invoice, Payment, Vendor
from prism.apps.finance.params import InvoiceList
from prism.apps.params import ListParams, Params, ReadParams
from prism.apps.sums import exact_sum, joined, sum_of
from prism.errors import Conflict, InvalidArguments
from prism.events.outbox import emit_for
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import OrgRepository, sent_changes, text_search, to_record

app = HandlerApp("finance", description="Accounts payable: vendors, invoices, aging.",
                 examples=shipped_examples())

InvoiceStatus = Literal["received", "approved", "disputed", "paid", "void"]
INVOICE_ORDERING = ("due_date", "issue_date", "amount_cents", "number", "created_at")

# The invoice state machine: which status may follow which.
INVOICE_TRANSITIONS: dict[str, frozenset[str]] = {
    "received": frozenset({"approved", "disputed", "void"}),
    "disputed": frozenset({"received", "void"}),
    "approved": frozenset({"paid", "disputed", "void"}),
    "paid": frozenset(),
    "void": frozenset(),
}


class VendorList(ListParams):
    status: Literal["active", "inactive"] | None = None


class VendorCreate(Params):
    name: str = Field(..., min_length=1, max_length=255)
    email: str = Field("", max_length=320)
    payment_terms_days: int = Field(30, ge=0, le=365)


class InvoiceCreate(Params):
    vendor_id: str = Field(..., min_length=1, max_length=64)
    number: str = Field(..., min_length=1, max_length=64)
    amount_cents: int = Field(..., gt=0, le=10**12)
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$")
    issue_date: date
    due_date: date
    memo: str = Field("", max_length=1000)

    @model_validator(mode="after")
    def _due_after_issue(self) -> InvoiceCreate:
        if self.due_date < self.issue_date:
            raise ValueError("due_date must not be before issue_date")
        return self


class InvoiceUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64)
    status: InvoiceStatus | None = Field(None, description="New status; must follow the state machine.")
    due_date: date | None = None
    memo: str | None = Field(None, max_length=1000)


class AgingParams(Params):
    as_of: date | None = Field(None, description="Date the aging is computed at (default: today, UTC).")
    vendor_id: str | None = Field(None, max_length=64, description="Only this vendor's invoices.")


@app.handler("entity_crud", "vendor", "list", params=VendorList, scope="read",
             description="List vendors.", keywords=("suppliers", "payables"))
async def list_vendors(call: HandlerCall, p: VendorList) -> dict[str, Any]:
    repo = OrgRepository(call.session, Vendor, call.organization_id, label="vendor")
    stmt = text_search(repo.base(), [Vendor.name, Vendor.email], p.search)
    if p.status:
        stmt = stmt.where(Vendor.status == p.status)
    return await repo.page(stmt, page=p.page, page_size=p.page_size, ordering=p.ordering,
                           orderable=("name", "created_at"), default_ordering="name")


@app.handler("entity_crud", "vendor", "read", params=ReadParams, scope="read",
             description="Read one vendor by id.", keywords=("supplier",))
async def read_vendor(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return await OrgRepository(call.session, Vendor, call.organization_id, label="vendor").get_record(p.id)


@app.handler("entity_crud", "vendor", "create", params=VendorCreate, scope="write",
             description="Add a vendor.", keywords=("supplier", "new vendor"))
async def create_vendor(call: HandlerCall, p: VendorCreate) -> dict[str, Any]:
    row = OrgRepository(call.session, Vendor, call.organization_id).add(**p.model_dump())
    await call.session.flush()
    return to_record(row)


async def paid_cents(call: HandlerCall, invoice_id: str) -> int:
    return await sum_of(call.session, Payment.amount_cents, Payment.invoice_id == invoice_id,
                        Payment.status == "recorded")


async def check_payments_allow(call: HandlerCall, invoice: Invoice, target: str) -> None:
    """What a status needs of the invoice's recorded payments, beyond the state machine: `paid` only once they
    reach its amount, `void` and `disputed` only with none (the update and the workflow actions alike)."""
    if target == "paid":
        if await paid_cents(call, invoice.id) < invoice.amount_cents:
            raise Conflict(f"invoice {invoice.number} is paid once its recorded payments reach its amount; "
                           "record a payment instead", code="invalid_transition")
    elif target in ("void", "disputed") and await paid_cents(call, invoice.id):
        raise Conflict(f"invoice {invoice.number} has recorded payments; void them first",
                       code="invalid_transition")


# The standard handlers of invoices (count, breakdown ..., declared in payments.py); the list below is the app's
# own and filters through them, so list, count and breakdown take the same filters.
INVOICES = Entity(Invoice, "invoice", "vendor invoices", InvoiceList, search=("number", "memo"),
                  orderable=INVOICE_ORDERING, default_ordering="due_date", deletable=False,
                  skip=frozenset({"list", "read"}), group_by=("status", "currency", "vendor_id"),
                  sums=("amount_cents",), filters={"due_before": lambda day: Invoice.due_date < day},
                  keywords=("bill", "accounts payable", "supplier invoice"))


# Moves that need a reason (kept in the memo) and so are made only by their workflow action, not by update.
_REASONED_MOVES = {("*", "void"): "void", ("*", "disputed"): "dispute", ("disputed", "received"): "resolveDispute"}


def _invoices(call: HandlerCall) -> OrgRepository[Invoice]:
    return OrgRepository(call.session, Invoice, call.organization_id, label="invoice")


@app.handler("entity_crud", "invoice", "list", params=InvoiceList, scope="read",
             description="List vendor invoices with filters (status, vendor, due date) and ordering.",
             keywords=("accounts payable", "bills", "unpaid", "overdue", "supplier invoice"))
async def list_invoices(call: HandlerCall, p: InvoiceList) -> dict[str, Any]:
    return await _invoices(call).page(filtered(call, INVOICES, p), page=p.page, page_size=p.page_size,
                                      ordering=p.ordering, orderable=INVOICE_ORDERING, default_ordering="due_date")


@app.handler("entity_crud", "invoice", "read", params=ReadParams, scope="read",
             description="Read one vendor invoice by id.", keywords=("bill", "accounts payable", "supplier invoice"))
async def read_invoice(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return await _invoices(call).get_record(p.id)


@app.handler("entity_crud", "invoice", "create", params=InvoiceCreate, scope="write",
             description="Record a vendor invoice (status starts as received); emits invoice.received.",
             keywords=("bill", "record invoice", "accounts payable", "supplier invoice"))
async def create_invoice(call: HandlerCall, p: InvoiceCreate) -> dict[str, Any]:
    vendor = await OrgRepository(call.session, Vendor, call.organization_id, label="vendor").get(p.vendor_id)
    if vendor.status != "active":
        raise Conflict(f"vendor {vendor.name} is inactive: inactive vendors take no invoices")
    row = _invoices(call).add(**p.model_dump(), status="received")
    await call.session.flush()
    await emit_for(call, "invoice.received", {
        "invoice_id": row.id, "number": row.number, "vendor_id": vendor.id, "vendor_name": vendor.name,
        "amount_cents": row.amount_cents, "currency": row.currency, "issue_date": row.issue_date.isoformat(),
        "due_date": row.due_date.isoformat(), "status": row.status})
    return to_record(row)


@app.handler("entity_crud", "invoice", "update", params=InvoiceUpdate, scope="write",
             description="Update an invoice: status (received → approved → paid; void and disputes only by their "
                         "workflow actions, which record the reason), due date, memo.",
             keywords=("approve invoice", "pay invoice", "dispute", "accounts payable", "supplier invoice"))
async def update_invoice(call: HandlerCall, p: InvoiceUpdate) -> dict[str, Any]:
    row = await _invoices(call).get(p.id)
    sent = sent_changes(p, Invoice)  # null clears (memo), absent keeps; status and due_date cannot be cleared
    if not sent:
        raise InvalidArguments("nothing to update: give at least one field besides id")
    if "status" in sent and p.status != row.status:
        if p.status not in INVOICE_TRANSITIONS[row.status]:
            allowed = sorted(INVOICE_TRANSITIONS[row.status]) or ["none"]
            raise Conflict(f"invoice status cannot go from {row.status} to {p.status} "
                           f"(allowed: {', '.join(allowed)})", code="invalid_transition")
        action = _REASONED_MOVES.get((row.status, p.status)) or _REASONED_MOVES.get(("*", p.status))
        if action:
            raise Conflict(f"invoice status {row.status} → {p.status} is workflow_action/finance/invoice/{action}, "
                           "which records its reason", code="invalid_transition")
        await check_payments_allow(call, row, p.status)
        row.status = p.status
    if p.due_date is not None and "due_date" in sent:
        if p.due_date < row.issue_date:
            raise InvalidArguments("due_date: must not be before the invoice's issue_date",
                                   field="due_date")
        row.due_date = p.due_date
    if "memo" in sent:
        row.memo = sent["memo"]
    await call.session.flush()
    return to_record(row)


@app.handler("report_query", "invoice", "agingApSummary", params=AgingParams, scope="read",
             permission="finance.view_invoice",
             description="Accounts-payable aging: outstanding invoice amounts by days past due "
                         "(current, 1-30, 31-60, 61-90, over 90), per currency and per vendor.",
             keywords=("aging", "ap aging", "overdue", "outstanding", "payables report", "past due"))
async def aging_ap_summary(call: HandlerCall, p: AgingParams) -> dict[str, Any]:
    # Outstanding = amount less recorded (partial) payments; a fully paid invoice is no longer open.
    high, low = exact_sum(Payment.amount_cents)
    paid = (select(Payment.invoice_id, high.label("high"), low.label("low"))
            .where(Payment.status == "recorded")
            .group_by(Payment.invoice_id).subquery())
    stmt = (select(Invoice.amount_cents, paid.c.high, paid.c.low, Invoice.currency, Invoice.due_date, Vendor.id,
                   Vendor.name)
            .join(Vendor, Vendor.id == Invoice.vendor_id)
            .outerjoin(paid, paid.c.invoice_id == Invoice.id)
            .where(Invoice.status.in_(("received", "approved", "disputed"))))
    if p.vendor_id:
        stmt = stmt.where(Invoice.vendor_id == p.vendor_id)
    rows = (await call.session.execute(stmt)).all()
    return aging_summary([(amount - joined(high, low), *rest) for amount, high, low, *rest in rows], as_of=p.as_of)
