"""Accounts-payable aging buckets, computed from outstanding invoices."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

from prism.apps.sums import fitted

BUCKETS = ("current", "days_1_30", "days_31_60", "days_61_90", "days_over_90")


def bucket_of(days_past_due: int) -> str:
    if days_past_due <= 0:
        return "current"
    if days_past_due <= 30:
        return "days_1_30"
    if days_past_due <= 60:
        return "days_31_60"
    if days_past_due <= 90:
        return "days_61_90"
    return "days_over_90"


def _empty() -> dict[str, int]:
    return dict.fromkeys((*BUCKETS, "total"), 0)


def aging_summary(rows: Iterable[Any], *, as_of: date | None) -> dict[str, Any]:
    """rows: (amount_cents, currency, due_date, vendor_id, vendor_name) of outstanding invoices."""
    as_of = as_of or datetime.now(UTC).date()
    by_currency: dict[str, dict[str, int]] = {}
    by_vendor: dict[tuple[str, str], dict[str, Any]] = {}
    count = 0
    for amount, currency, due_date, vendor_id, vendor_name in rows:
        bucket = bucket_of((as_of - due_date).days)
        count += 1
        totals = by_currency.setdefault(currency, _empty())
        totals[bucket] += amount
        totals["total"] += amount
        vendor = by_vendor.setdefault((vendor_id, currency), {
            "vendor_id": vendor_id, "vendor_name": vendor_name, "currency": currency, **_empty()})
        vendor[bucket] += amount
        vendor["total"] += amount
    return {
        "as_of": as_of.isoformat(),
        "amounts_in": "cents",
        "invoice_count": count,
        "buckets": list(BUCKETS),
        "by_currency": [{"currency": c, **shown(t)} for c, t in sorted(by_currency.items())],
        "by_vendor": [shown(v) for v in sorted(by_vendor.values(), key=lambda v: (-v["total"], v["vendor_name"]))],
    }


def shown(totals: dict[str, Any]) -> dict[str, Any]:
    """`totals` with each bucket and the total as a report shows a sum (`prism.apps.sums.fitted`)."""
    return {k: fitted(v) if k in BUCKETS or k == "total" else v for k, v in totals.items()}
