"""Parameter models of the finance additions: payments, invoice actions, vendor maintenance, reports."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, model_validator

from prism.apps.params import ListParams, Params

Method = Literal["ach", "wire", "check", "card", "other"]


class PaymentList(ListParams):
    status: Literal["recorded", "void"] | None = Field(None, description="Only recorded or voided payments.")
    invoice_id: str | None = Field(None, max_length=64, description="Only payments of this invoice.")
    vendor_id: str | None = Field(None, max_length=64, description="Only payments to this vendor.")
    method: Method | None = Field(None, description="Only payments made this way.")
    paid_on_after: date | None = Field(None, description="Only payments made after this date.")
    paid_on_before: date | None = Field(None, description="Only payments made before this date.")


class PaymentCreate(Params):
    invoice_id: str = Field(..., min_length=1, max_length=64, description="Approved invoice the payment settles.")
    amount_cents: int | None = Field(None, gt=0, le=10**12,
                                     description="Amount paid in cents; default the invoice's open balance.")
    paid_on: date = Field(..., description="Date the money left.")
    method: Method = Field("ach", description="How the vendor was paid.")
    reference: str = Field("", max_length=128, description="Bank or check reference.")


class PaymentVoid(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Payment id.")
    reason: str = Field(..., min_length=1, max_length=1000, description="Why the payment is voided (bounced ...).")


class VendorList(ListParams):
    status: Literal["active", "inactive"] | None = Field(None, description="Only vendors with this status.")


class VendorUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Vendor id.")
    name: str | None = Field(None, min_length=1, max_length=255, description="Vendor name.")
    email: str | None = Field(None, max_length=320, description="Accounts-receivable address of the vendor.")
    payment_terms_days: int | None = Field(None, ge=0, le=365, description="Days between invoice and due date.")
    status: Literal["active", "inactive"] | None = Field(None, description="Inactive vendors take no invoices.")


class InvoiceList(ListParams):
    status: Literal["received", "approved", "disputed", "paid", "void"] | None = Field(
        None, description="Only invoices in this state.")
    vendor_id: str | None = Field(None, max_length=64, description="Only invoices of this vendor.")
    currency: str | None = Field(None, pattern=r"^[A-Z]{3}$", description="Only invoices in this currency.")
    due_before: date | None = Field(None, description="Only invoices due before this date.")
    amount_cents_min: int | None = Field(None, ge=0, le=10**12,
                                         description="Only invoices of at least this amount.")


class InvoiceAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Invoice id.")


class InvoiceReason(InvoiceAction):
    reason: str = Field(..., min_length=1, max_length=1000, description="Why (kept in the invoice memo).")


class PayInFull(InvoiceAction):
    paid_on: date = Field(..., description="Date the money left.")
    method: Method = Field("ach", description="How the vendor was paid.")
    reference: str = Field("", max_length=128, description="Bank or check reference.")


class StatementParams(Params):
    vendor_id: str = Field(..., min_length=1, max_length=64, description="Vendor the statement is for.")
    since: date | None = Field(None, description="List only invoices issued and payments made on or after this "
                                                 "date; what was owed before it is the opening balance.")


class PaymentsReport(Params):
    paid_on_after: date | None = Field(None, description="Start of the period (exclusive).")
    paid_on_before: date | None = Field(None, description="End of the period (exclusive).")

    @model_validator(mode="after")
    def _ordered(self) -> PaymentsReport:
        if self.paid_on_after and self.paid_on_before and self.paid_on_before <= self.paid_on_after:
            raise ValueError("paid_on_before must be after paid_on_after")
        return self
