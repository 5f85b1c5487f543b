"""finance, continued: payments applied to invoices, the invoice actions, vendor upkeep, AP reports.

An invoice is paid when its recorded payments reach its amount: the payment that settles it moves it to
`paid`; voiding a payment of a paid invoice moves it back to `approved`. Only approved invoices take
payments, and never more than their open balance.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import func, select

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, dependants, repo
from prism.apps.finance.handlers import INVOICE_TRANSITIONS, INVOICES, check_payments_allow, paid_cents
from prism.apps.finance.models import Invoice, Payment, PurchaseOrder, Vendor
from prism.apps.finance.params import (
    InvoiceAction,
    InvoiceReason,
    PayInFull,
    PaymentCreate,
    PaymentList,
    PaymentsReport,
    PaymentVoid,
    StatementParams,
    VendorList,
    VendorUpdate,
)
from prism.apps.states import move
from prism.apps.sums import exact_sum, fitted, joined, total
from prism.errors import Conflict
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("finance", description="Accounts payable: vendors, invoices, payments, aging.",
                 examples=shipped_examples())



async def _invoice(call: HandlerCall, invoice_id: str) -> Invoice:
    row: Invoice = await repo(call, Invoice, "invoice").get(invoice_id)
    return row


async def _prepare_payment(call: HandlerCall, values: dict[str, Any], row: Any) -> dict[str, Any]:
    invoice = await _invoice(call, values["invoice_id"])
    if invoice.status != "approved":
        raise Conflict(f"invoice {invoice.number} is {invoice.status}; only approved invoices are paid",
                       code="invalid_transition", details={"status": invoice.status})
    balance = invoice.amount_cents - await paid_cents(call, invoice.id)
    amount = values["amount_cents"] or balance
    if amount > balance:
        raise Conflict(f"payment of {amount} exceeds the open balance {balance} of invoice {invoice.number}",
                       code="overpayment", details={"open_balance_cents": balance})
    return {**values, "amount_cents": amount, "currency": invoice.currency, "vendor_id": invoice.vendor_id}


async def _settle(call: HandlerCall, payment: Payment) -> None:
    invoice = await _invoice(call, payment.invoice_id)
    if await paid_cents(call, invoice.id) >= invoice.amount_cents:
        move(invoice, "paid", INVOICE_TRANSITIONS, "invoice")
        await call.session.flush()


async def _before_vendor_delete(call: HandlerCall, vendor: Vendor) -> None:
    held = await dependants(call, ("invoice", Invoice, Invoice.vendor_id == vendor.id),
                            ("purchase order", PurchaseOrder, PurchaseOrder.vendor_id == vendor.id))
    if held:
        raise Conflict(f"vendor {vendor.name} has {held}; set it inactive instead")


crud(app, Entity(Payment, "payment", "vendor payments", PaymentList, search=("reference", "void_reason"),
                 orderable=("paid_on", "amount_cents", "created_at"), default_ordering="-paid_on",
                 create=PaymentCreate, deletable=False, group_by=("status", "vendor_id", "method", "currency"),
                 sums=("amount_cents",), prepare=_prepare_payment, after_create=_settle,
                 keywords=("pay vendor", "remittance", "disbursement", "settle invoice", "payout", "outgoing payment")))
crud(app, Entity(Vendor, "vendor", "vendors", VendorList, search=("name", "email"),
                 orderable=("name", "created_at"), default_ordering="name", update=VendorUpdate,
                 skip=frozenset({"list", "read"}), group_by=("status", "payment_terms_days"),
                 before_delete=_before_vendor_delete, keywords=("supplier", "seller", "contractor")))
crud(app, INVOICES)


@app.handler("workflow_action", "payment", "void", params=PaymentVoid, scope="execute", destructive=True,
             description="Void a recorded payment (bounced, sent in error); a paid invoice reopens as approved.",
             keywords=("reverse payment", "cancel payment", "bounced check"))
async def void_payment(call: HandlerCall, p: PaymentVoid) -> dict[str, Any]:
    payment: Payment = await repo(call, Payment, "payment").get(p.id)
    move(payment, "void", {"recorded": frozenset({"void"})}, "payment")
    payment.void_reason = p.reason
    await call.session.flush()
    invoice = await _invoice(call, payment.invoice_id)
    if invoice.status == "paid":
        invoice.status = "approved"  # back to open: its payments no longer cover it
        await call.session.flush()
    return to_record(payment)


async def _move_invoice(call: HandlerCall, invoice_id: str, target: str, note: str = "") -> dict[str, Any]:
    invoice = await _invoice(call, invoice_id)
    move(invoice, target, INVOICE_TRANSITIONS, "invoice")
    await check_payments_allow(call, invoice, target)
    if note:
        invoice.memo = ((invoice.memo + "\n") if invoice.memo else "")[-800:] + note[:190]
    await call.session.flush()
    return to_record(invoice)


@app.handler("workflow_action", "invoice", "approve", params=InvoiceAction, scope="execute",
             description="Approve a received invoice for payment.", keywords=("approve bill", "ok to pay"))
async def approve_invoice(call: HandlerCall, p: InvoiceAction) -> dict[str, Any]:
    return await _move_invoice(call, p.id, "approved")


@app.handler("workflow_action", "invoice", "dispute", params=InvoiceReason, scope="execute",
             description="Dispute a received or approved invoice with the vendor; the reason goes in the memo.",
             keywords=("contest bill", "wrong invoice", "query vendor"))
async def dispute_invoice(call: HandlerCall, p: InvoiceReason) -> dict[str, Any]:
    return await _move_invoice(call, p.id, "disputed", f"Disputed: {p.reason}")


@app.handler("workflow_action", "invoice", "resolveDispute", params=InvoiceReason, scope="execute",
             description="Close a dispute: the invoice returns to received for approval.",
             keywords=("dispute settled", "corrected invoice"))
async def resolve_dispute(call: HandlerCall, p: InvoiceReason) -> dict[str, Any]:
    return await _move_invoice(call, p.id, "received", f"Dispute resolved: {p.reason}")


@app.handler("workflow_action", "invoice", "void", params=InvoiceReason, scope="execute", destructive=True,
             description="Void an open invoice that will never be paid (duplicate, cancelled order).",
             keywords=("cancel invoice", "duplicate bill"))
async def void_invoice(call: HandlerCall, p: InvoiceReason) -> dict[str, Any]:
    return await _move_invoice(call, p.id, "void", f"Void: {p.reason}")


@app.handler("smart_action", "invoice", "payInFull", params=PayInFull, scope="execute",
             permission="finance.add_payment",
             description="Pay an invoice's whole open balance in one step: approves a received invoice, records "
                         "the payment and marks the invoice paid.", keywords=("settle bill", "pay invoice now"))
async def pay_in_full(call: HandlerCall, p: PayInFull) -> dict[str, Any]:
    invoice = await _invoice(call, p.id)
    if invoice.status == "received":
        move(invoice, "approved", INVOICE_TRANSITIONS, "invoice")
    values = await _prepare_payment(call, {"invoice_id": invoice.id, "amount_cents": None, "paid_on": p.paid_on,
                                           "method": p.method, "reference": p.reference}, None)
    payment: Payment = repo(call, Payment, "payment").add(**values)
    await call.session.flush()
    await _settle(call, payment)
    return {"invoice": to_record(invoice), "payment": to_record(payment)}


# The invoice statuses that bill the vendor's account (a void invoice does not).
BILLED = ("received", "approved", "disputed", "paid")


async def _opening_balance(call: HandlerCall, vendor_id: str, since: date) -> dict[str, int]:
    """Per currency, where the vendor's account stood before `since`: invoices issued less payments made."""
    balance: dict[str, int] = {}
    for sign, stmt in (
            (1, select(Invoice.currency, *exact_sum(Invoice.amount_cents)).where(
                Invoice.vendor_id == vendor_id, Invoice.status.in_(BILLED), Invoice.issue_date < since)
             .group_by(Invoice.currency)),
            (-1, select(Payment.currency, *exact_sum(Payment.amount_cents)).where(
                Payment.vendor_id == vendor_id, Payment.status == "recorded", Payment.paid_on < since)
             .group_by(Payment.currency))):
        for currency, high, low in await call.session.execute(stmt):
            balance[currency] = balance.get(currency, 0) + sign * joined(high, low)
    return balance


def _per_currency(balance: dict[str, int]) -> list[dict[str, Any]]:
    return [{"currency": c, "amount_cents": fitted(a)} for c, a in sorted(balance.items())]


@app.handler("report_query", "vendor", "statement", params=StatementParams, scope="read",
             permission="finance.view_vendor",
             description="A vendor's account statement: invoices, payments and the open balance per currency; with "
                         "`since`, the rows from that date on and the opening balance before it.",
             keywords=("vendor balance", "what do we owe", "account statement"))
async def vendor_statement(call: HandlerCall, p: StatementParams) -> dict[str, Any]:
    vendor: Vendor = await repo(call, Vendor, "vendor").get(p.vendor_id)
    since = p.since or date.min
    invoices = (await call.session.execute(repo(call, Invoice, "invoice").base().where(
        Invoice.vendor_id == vendor.id, Invoice.issue_date >= since).order_by(Invoice.issue_date, Invoice.id)))
    payments = (await call.session.execute(repo(call, Payment, "payment").base().where(
        Payment.vendor_id == vendor.id, Payment.paid_on >= since).order_by(Payment.paid_on, Payment.id)))
    invoice_rows = [to_record(i) for i in invoices.scalars()]
    payment_rows = [to_record(x) for x in payments.scalars()]
    # `since` only shortens the list: what was owed before it is carried in as the opening balance, so the open
    # balance is the account's whole (an invoice paid after `since` is not shown as money the vendor owes us).
    opening = await _opening_balance(call, vendor.id, p.since) if p.since else {}
    balance = dict(opening)
    for i in invoice_rows:
        if i["status"] in BILLED:
            balance[i["currency"]] = balance.get(i["currency"], 0) + i["amount_cents"]
    for x in payment_rows:
        if x["status"] == "recorded":
            balance[x["currency"]] = balance.get(x["currency"], 0) - x["amount_cents"]
    return {"vendor": to_record(vendor), "since": p.since.isoformat() if p.since else None,
            "opening_balance_cents": _per_currency(opening), "invoices": invoice_rows, "payments": payment_rows,
            "open_balance_cents": _per_currency(balance)}


@app.handler("report_query", "payment", "byVendor", params=PaymentsReport, scope="read",
             permission="finance.view_payment",
             description="Money paid out per vendor, currency and method over a period (voided payments excluded).",
             keywords=("spend by supplier", "cash out", "payments report"))
async def payments_by_vendor(call: HandlerCall, p: PaymentsReport) -> dict[str, Any]:
    stmt = (select(Vendor.id, Vendor.name, Payment.currency, Payment.method, func.count(),
                   *exact_sum(Payment.amount_cents))
            .join(Vendor, Vendor.id == Payment.vendor_id)
            .where(Payment.status == "recorded")
            .group_by(Vendor.id, Vendor.name, Payment.currency, Payment.method)
            .order_by(Vendor.name, Payment.currency, Payment.method))
    if p.paid_on_after:
        stmt = stmt.where(Payment.paid_on > p.paid_on_after)
    if p.paid_on_before:
        stmt = stmt.where(Payment.paid_on < p.paid_on_before)
    rows = (await call.session.execute(stmt)).all()
    return {"amounts_in": "cents", "rows": [
        {"vendor_id": r[0], "vendor_name": r[1], "currency": r[2], "method": r[3], "payments": r[4],
         "amount_cents": total(r[5], r[6])} for r in rows]}
