"""finance, claims and spare_parts: money totals are exact on both engines, and are shown as breakdowns show them
(prism.apps.sums): a JSON integer within the signed 64-bit range, past it the string of its digits; a total kept
in a 64-bit column is refused past that range (409). Amounts near 2**62 are written straight to the database (as
years of rows, or an import, would leave them): SQLite's SUM() raises "integer overflow" past 2**63 and an
encoder refuses an integer past 2**64; sums past 2**53 stay exact, where a float would drop their last units."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import update

from prism.apps.claims.models import Claim, ClaimLine
from prism.apps.finance.models import Invoice, Payment
from prism.kit.numbers import SQL_BIGINT_MAX
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory

NEAR_2_62 = 2**62 + 1  # two of them pass 2**63 - 1
PAST_INT64 = str(2 * NEAR_2_62)
PAST_2_53 = (2**53 + 1, 2)  # their sum, 2**53 + 3, is no float: one would read it as 2**53 + 4


async def _set(db: Database, model: Any, row_id: str, **values: int) -> None:
    async with db.write() as session:
        await session.execute(update(model).where(model.id == row_id).values(**values))


async def _paid_invoice_of(c: Caller, vendor: dict[str, Any], number: str, method: str) -> tuple[str, str]:
    invoice = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": number, "amount_cents": 100,
                                                    "currency": "EUR", "issue_date": "2024-01-01",
                                                    "due_date": "2024-01-31"})
    await c.ok("workflow_action", "finance", "invoice", "approve", {"id": invoice["id"]})
    payment = await c.create("finance", "payment", {"invoice_id": invoice["id"], "amount_cents": 40,
                                                    "paid_on": "2024-02-01", "method": method})
    return invoice["id"], payment["id"]


async def test_finance_payment_reports_total_past_64_bits_exactly(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    vendor = await c.create("finance", "vendor", {"name": "Acme Bearings"})
    paid = [await _paid_invoice_of(c, vendor, f"INV-{i}", method)
            for i, method in enumerate(("ach", "ach", "wire", "wire"))]
    for (invoice_id, payment_id), amount in zip(paid, (NEAR_2_62, NEAR_2_62, *PAST_2_53), strict=True):
        await _set(db, Invoice, invoice_id, amount_cents=amount + 10)  # 10 cents of each still open
        await _set(db, Payment, payment_id, amount_cents=amount)
    by_vendor = await c.ok("report_query", "finance", "payment", "byVendor", {})
    assert [(r["method"], r["payments"], r["amount_cents"]) for r in by_vendor["rows"]] == [
        ("ach", 2, PAST_INT64), ("wire", 2, sum(PAST_2_53))]
    breakdown = await c.ok("report_query", "finance", "payment", "breakdown", {"by": "method"})
    assert [g["total_amount_cents"] for g in breakdown["groups"]] == [PAST_INT64, sum(PAST_2_53)]
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", {"as_of": "2024-01-15"})
    assert aging["invoice_count"] == 4 and aging["by_currency"][0]["current"] == aging["by_currency"][0]["total"] == 40


async def test_finance_aging_and_statement_total_open_invoices_past_64_bits_exactly(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    vendor = await c.create("finance", "vendor", {"name": "Acme Bearings"})
    invoice_id, payment_id = await _paid_invoice_of(c, vendor, "INV-1", "ach")
    await _set(db, Invoice, invoice_id, amount_cents=NEAR_2_62 + 40)  # 40 cents still open
    await _set(db, Payment, payment_id, amount_cents=NEAR_2_62)
    for number in ("OPEN-1", "OPEN-2"):  # unpaid
        invoice = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": number,
                                                        "amount_cents": 100, "currency": "EUR",
                                                        "issue_date": "2024-01-01", "due_date": "2024-01-31"})
        await _set(db, Invoice, invoice["id"], amount_cents=NEAR_2_62)
    owed = str(2 * NEAR_2_62 + 40)
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", {"as_of": "2024-01-15"})
    assert [(b["currency"], b["current"], b["total"]) for b in aging["by_currency"]] == [("EUR", owed, owed)]
    assert [v["total"] for v in aging["by_vendor"]] == [owed]
    statement = await c.ok("report_query", "finance", "vendor", "statement", {"vendor_id": vendor["id"]})
    assert statement["open_balance_cents"] == [{"currency": "EUR", "amount_cents": owed}]


async def test_finance_reports_keep_sums_past_2_53_exact(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    vendor = await c.create("finance", "vendor", {"name": "Acme Bearings"})
    paid = [await _paid_invoice_of(c, vendor, f"INV-{i}", "ach") for i in range(2)]
    for (invoice_id, payment_id), amount in zip(paid, PAST_2_53, strict=True):
        await _set(db, Invoice, invoice_id, amount_cents=2 * amount)
        await _set(db, Payment, payment_id, amount_cents=amount)
    by_vendor = await c.ok("report_query", "finance", "payment", "byVendor", {})
    assert [r["amount_cents"] for r in by_vendor["rows"]] == [2**53 + 3]
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", {"as_of": "2024-01-15"})
    assert aging["by_currency"][0]["total"] == 2**53 + 3


async def _claim_with_line(c: Caller, payer: dict[str, Any], patient: dict[str, Any], number: str) -> dict[str, Any]:
    claim = await c.create("claims", "claim", {"number": number, "payer_id": payer["id"], "patient_id": patient["id"],
                                               "service_date": "2024-03-01"})
    await c.create("claims", "claim_line", {"claim_id": claim["id"], "procedure_code": "99213",
                                            "unit_price_cents": 100})
    return claim


async def test_claims_reports_total_past_64_bits_exactly(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    payer = await c.create("claims", "payer", {"code": "BCX", "name": "Blue Cross Example"})
    patient = await c.create("claims", "patient", {"member_id": "M-100", "name": "Ada Lovelace"})
    claims = [await _claim_with_line(c, payer, patient, f"CLM-{i}") for i in range(2)]
    for claim in claims:
        await c.ok("workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
        await _set(db, Claim, claim["id"], billed_cents=NEAR_2_62, approved_cents=NEAR_2_62, paid_cents=NEAR_2_62)
    [row] = (await c.ok("report_query", "claims", "claim", "byPayer", {}))["payers"]
    assert (row["claims"], row["billed_cents"], row["approved_cents"], row["paid_cents"]) == (
        2, PAST_INT64, PAST_INT64, PAST_INT64)
    aging = await c.ok("report_query", "claims", "claim", "receivablesAging", {})
    assert aging["claim_count"] == 2 and aging["by_currency"][0]["total"] == PAST_INT64
    await _set(db, Claim, claims[1]["id"], billed_cents=PAST_2_53[0])
    await _set(db, Claim, claims[0]["id"], billed_cents=PAST_2_53[1])
    [row] = (await c.ok("report_query", "claims", "claim", "byPayer", {}))["payers"]
    assert row["billed_cents"] == 2**53 + 3


async def test_a_claim_line_that_would_bill_past_64_bits_is_refused(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    payer = await c.create("claims", "payer", {"code": "BCX", "name": "Blue Cross Example"})
    patient = await c.create("claims", "patient", {"member_id": "M-100", "name": "Ada Lovelace"})
    draft = await _claim_with_line(c, payer, patient, "CLM-BIG")
    [line] = (await c.ok("entity_crud", "claims", "claim_line", "list", {"claim_id": draft["id"]}))["items"]
    await _set(db, ClaimLine, line["id"], amount_cents=SQL_BIGINT_MAX - 50)
    await _set(db, Claim, draft["id"], billed_cents=SQL_BIGINT_MAX - 50)
    message = await c.refused(409, "conflict", "entity_crud", "claims", "claim_line", "create", {
        "claim_id": draft["id"], "procedure_code": "99214", "unit_price_cents": 100})
    assert "CLM-BIG" in message and "another claim" in message
    assert (await c.ok("entity_crud", "claims", "claim_line", "count", {"claim_id": draft["id"]}))["count"] == 1
    assert (await c.read("claims", "claim", draft["id"]))["billed_cents"] == SQL_BIGINT_MAX - 50
    await c.create("claims", "claim_line", {"claim_id": draft["id"], "procedure_code": "99214",
                                            "unit_price_cents": 50})  # exactly the most a claim bills
    assert (await c.read("claims", "claim", draft["id"]))["billed_cents"] == SQL_BIGINT_MAX


async def test_the_reorder_report_costs_orders_past_64_bits_exactly(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    dear = {"reorder_level": 10_000_000, "unit_cost_cents": 10**12}  # 2 * 10**7 units to order: 2 * 10**19 cents
    await c.create("spare_parts", "spare_part", {"sku": "A-DIE", "name": "Die", **dear})
    fair = {"reorder_level": 4_000_000, "unit_cost_cents": 10**12 - 1}  # 8 * 10**6 units: under 2**63 cents,
    await c.create("spare_parts", "spare_part", {"sku": "B-PUNCH", "name": "Punch", "location": "Bay 2",
                                                 **fair})  # past 2**53
    report = await c.ok("report_query", "spare_parts", "spare_part", "reorderReport", {})
    assert [p["estimated_cost_cents"] for p in report["parts"]] == [str(2 * 10**19), 7_999_999_999_992_000_000]
    assert report["estimated_total_cents"] == str(2 * 10**19 + 7_999_999_999_992_000_000)
    bay = await c.ok("report_query", "spare_parts", "spare_part", "reorderReport", {"location": "Bay 2"})
    assert bay["estimated_total_cents"] == 7_999_999_999_992_000_000  # within 64 bits: a JSON integer
