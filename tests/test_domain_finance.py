"""finance: invoices emit invoice.received, payments settle invoices, the AP aging counts what is still owed."""

from __future__ import annotations

import uuid

import httpx

from prism.storage import Database
from tests.domain_support import Caller, events
from tests.factories import Factory


async def _vendor_invoice(c: Caller, amount: int = 100_000, number: str = "INV-1") -> tuple[dict, dict]:  # type: ignore[type-arg]
    vendor = await c.create("finance", "vendor", {"name": "Acme Bearings", "email": "ap@acme.example"})
    invoice = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": number,
                                                     "amount_cents": amount, "currency": "EUR",
                                                     "issue_date": "2024-01-01", "due_date": "2024-01-31"})
    return vendor, invoice


async def test_recording_an_invoice_emits_invoice_received_with_the_vendor_and_amount(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    vendor, invoice = await _vendor_invoice(Caller(client, ws))
    [event] = await events(db, ws.org.id, "invoice.received")
    assert event["organization_id"] == "org_" + uuid.UUID(ws.org.id).hex
    assert event["event_id"].startswith("evt_") and event["api_version"] == "2024-12-31"
    assert event["data"] == {"invoice_id": invoice["id"], "number": "INV-1", "vendor_id": vendor["id"],
                             "vendor_name": "Acme Bearings", "amount_cents": 100_000, "currency": "EUR",
                             "issue_date": "2024-01-01", "due_date": "2024-01-31", "status": "received"}


async def test_partial_payments_then_the_settling_payment_mark_the_invoice_paid_and_aging_follows(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    _, invoice = await _vendor_invoice(c)
    aging_args = {"as_of": "2024-02-15"}
    # Only approved invoices are paid.
    await c.refused(409, "invalid_transition", "entity_crud", "finance", "payment", "create",
                    {"invoice_id": invoice["id"], "amount_cents": 10, "paid_on": "2024-02-01"})
    await c.ok("workflow_action", "finance", "invoice", "approve", {"id": invoice["id"]})
    first = await c.create("finance", "payment", {"invoice_id": invoice["id"], "amount_cents": 30_000,
                                                  "paid_on": "2024-02-01", "reference": "WIRE-1"})
    assert first["currency"] == "EUR" and first["status"] == "recorded"
    assert (await c.read("finance", "invoice", invoice["id"]))["status"] == "approved"
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", aging_args)
    assert aging["by_currency"][0]["days_1_30"] == 70_000 and aging["invoice_count"] == 1
    message = await c.refused(409, "overpayment", "entity_crud", "finance", "payment", "create",
                              {"invoice_id": invoice["id"], "amount_cents": 70_001, "paid_on": "2024-02-02"})
    assert "70000" in message
    rest = await c.create("finance", "payment", {"invoice_id": invoice["id"], "paid_on": "2024-02-03"})
    assert rest["amount_cents"] == 70_000  # default: the open balance
    assert (await c.read("finance", "invoice", invoice["id"]))["status"] == "paid"
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", aging_args)
    assert aging["invoice_count"] == 0 and aging["by_currency"] == []
    # Voiding a payment reopens the invoice for the unpaid part.
    await c.ok("workflow_action", "finance", "payment", "void", {"id": rest["id"], "reason": "bounced"})
    assert (await c.read("finance", "invoice", invoice["id"]))["status"] == "approved"
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", aging_args)
    assert aging["by_currency"][0]["total"] == 70_000
    await c.refused(409, "invalid_transition", "workflow_action", "finance", "payment", "void",
                    {"id": rest["id"], "reason": "twice"})
    statement = await c.ok("report_query", "finance", "vendor", "statement", {"vendor_id": invoice["vendor_id"]})
    assert statement["open_balance_cents"] == [{"currency": "EUR", "amount_cents": 70_000}]
    by_vendor = await c.ok("report_query", "finance", "payment", "byVendor", {})
    assert [(r["amount_cents"], r["payments"]) for r in by_vendor["rows"]] == [(30_000, 1)]


async def test_invoice_actions_follow_the_state_machine(client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    _, invoice = await _vendor_invoice(c)
    disputed = await c.ok("workflow_action", "finance", "invoice", "dispute", {"id": invoice["id"],
                                                                              "reason": "wrong quantity"})
    assert disputed["status"] == "disputed" and "wrong quantity" in disputed["memo"]
    await c.refused(409, "invalid_transition", "workflow_action", "finance", "invoice", "approve",
                    {"id": invoice["id"]})
    await c.ok("workflow_action", "finance", "invoice", "resolveDispute", {"id": invoice["id"], "reason": "credit"})
    paid = await c.ok("smart_action", "finance", "invoice", "payInFull", {"id": invoice["id"], "paid_on": "2024-02-01"})
    assert paid["invoice"]["status"] == "paid" and paid["payment"]["amount_cents"] == 100_000
    await c.refused(409, "invalid_transition", "workflow_action", "finance", "invoice", "void",
                    {"id": invoice["id"], "reason": "late"})
    counted = await c.ok("entity_crud", "finance", "invoice", "count", {"status": "paid"})
    assert counted == {"count": 1}


async def test_an_amount_filter_beyond_any_amount_is_refused_not_sent_to_the_database(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    for mega_tool, operation in (("entity_crud", "list"), ("entity_crud", "count"), ("report_query", "breakdown")):
        message = await c.refused(400, "invalid_arguments", mega_tool, "finance", "invoice", operation,
                                  {"amount_cents_min": 2**63})
        assert "amount_cents_min" in message, (mega_tool, operation)


async def test_another_organizations_invoices_and_payments_are_not_found(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs = Caller(client, (await factory.workspace(roles=("owner",))))
    _, invoice = await _vendor_invoice(theirs)
    payment = (await theirs.ok("smart_action", "finance", "invoice", "payInFull",
                               {"id": invoice["id"], "paid_on": "2024-02-01"}))["payment"]
    await mine.refused(404, "not_found", "entity_crud", "finance", "payment", "create",
                       {"invoice_id": invoice["id"], "paid_on": "2024-02-01"})
    await mine.refused(404, "not_found", "entity_crud", "finance", "payment", "read", {"id": payment["id"]})
    await mine.refused(404, "not_found", "workflow_action", "finance", "payment", "void",
                       {"id": payment["id"], "reason": "x"})
    await mine.refused(404, "not_found", "report_query", "finance", "vendor", "statement",
                       {"vendor_id": invoice["vendor_id"]})
    assert (await mine.ok("entity_crud", "finance", "payment", "list", {}))["total"] == 0
    many = await mine.ok("entity_crud", "finance", "invoice", "readMany", {"ids": [invoice["id"]]})
    assert many == {"items": [], "missing": [invoice["id"]]}


async def test_a_purchase_order_is_approved_received_and_closed_and_only_drafts_change(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    vendor = await c.create("finance", "vendor", {"name": "Hydra Supply"})
    order = await c.create("finance", "purchase_order", {"vendor_id": vendor["id"], "number": "PO-1",
                                                         "amount_cents": 25_000, "description": "Filters"})
    assert order["status"] == "draft"
    await c.ok("entity_crud", "finance", "purchase_order", "update", {"id": order["id"], "amount_cents": 26_000})
    await c.refused(409, "invalid_transition", "workflow_action", "finance", "purchase_order", "receive",
                    {"id": order["id"]})
    approved = await c.ok("workflow_action", "finance", "purchase_order", "approve", {"id": order["id"]})
    assert approved["approved_by"] == ws.emails["owner"]
    await c.refused(409, "invalid_transition", "entity_crud", "finance", "purchase_order", "update",
                    {"id": order["id"], "amount_cents": 1})
    received = await c.ok("workflow_action", "finance", "purchase_order", "receive",
                          {"id": order["id"], "received_on": "2024-05-02"})
    assert (received["status"], received["received_on"]) == ("received", "2024-05-02")
    await c.refused(409, "invalid_transition", "workflow_action", "finance", "purchase_order", "cancel",
                    {"id": order["id"]})
    await c.ok("workflow_action", "finance", "purchase_order", "close", {"id": order["id"]})
    await c.refused(409, "invalid_transition", "entity_crud", "finance", "purchase_order", "delete",
                    {"id": order["id"]})
    await c.ok("entity_crud", "finance", "vendor", "update", {"id": vendor["id"], "status": "inactive"})
    await c.refused(409, "conflict", "entity_crud", "finance", "purchase_order", "create",
                    {"vendor_id": vendor["id"], "number": "PO-2", "amount_cents": 1})
    breakdown = await c.ok("report_query", "finance", "purchase_order", "breakdown", {"by": "status"})
    assert breakdown["groups"] == [{"value": "closed", "count": 1, "total_amount_cents": 26_000}]


async def test_an_amount_beyond_32_bits_is_stored_and_read_back_on_every_engine(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """Amounts go up to 10^12 cents; PostgreSQL's INTEGER stopped at 2^31 - 1 (an invoice of 30 million was a 500)."""
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    amount = 3_000_000_000_00
    _, invoice = await _vendor_invoice(c, amount=amount)
    assert (await c.read("finance", "invoice", invoice["id"]))["amount_cents"] == amount
    mission = await c.ok("mission_control", "missions", "mission", "create",
                         {"name": "capex", "budget_ceiling": amount})
    assert mission["budget_ceiling"] == amount
