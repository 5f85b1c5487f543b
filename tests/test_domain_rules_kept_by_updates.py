"""Business rules of the built-in handlers that a client can get around."""

from __future__ import annotations

import httpx

from tests.domain_support import Caller
from tests.factories import Factory


async def _approved_invoice(c: Caller, number: str = "INV-1") -> tuple[dict, dict]:  # type: ignore[type-arg]
    vendor = await c.create("finance", "vendor", {"name": "Acme Bearings"})
    invoice = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": number,
                                                     "amount_cents": 100_000, "issue_date": "2024-01-01",
                                                     "due_date": "2024-01-31"})
    await c.ok("workflow_action", "finance", "invoice", "approve", {"id": invoice["id"]})
    return vendor, invoice


async def test_an_inactive_vendor_takes_no_invoices(client: httpx.AsyncClient, factory: Factory) -> None:
    # VendorUpdate.status: "Inactive vendors take no invoices." (purchase orders already refuse them: 409).
    c = Caller(client, await factory.workspace(roles=("owner",)))
    vendor = await c.create("finance", "vendor", {"name": "Gone Ltd"})
    await c.ok("entity_crud", "finance", "vendor", "update", {"id": vendor["id"], "status": "inactive"})
    await c.refused(409, "conflict", "entity_crud", "finance", "purchase_order",
                    "create", {"vendor_id": vendor["id"], "number": "PO-1", "amount_cents": 500})
    status, body = await c.raw("entity_crud", "finance", "invoice", "create", {
        "vendor_id": vendor["id"], "number": "INV-9", "amount_cents": 500, "issue_date": "2024-01-01",
        "due_date": "2024-01-31"})
    assert status == 409 and body["success"] is False, (status, body)


async def test_invoice_update_cannot_void_an_invoice_with_recorded_payments(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    _vendor, invoice = await _approved_invoice(c)
    await c.create("finance", "payment", {"invoice_id": invoice["id"], "amount_cents": 40_000, "paid_on": "2024-02-01"})
    # The workflow action refuses...
    await c.refused(409, "invalid_transition", "workflow_action", "finance", "invoice", "void",
                    {"id": invoice["id"], "reason": "duplicate"})
    # ...and entity_crud update must not do what the action refuses.
    status, body = await c.raw("entity_crud", "finance", "invoice", "update", {"id": invoice["id"], "status": "void"})
    assert (status, body.get("error")) == (409, "invalid_transition"), (status, body)
    assert (await c.read("finance", "invoice", invoice["id"]))["status"] == "approved"


async def test_invoice_update_cannot_mark_an_unpaid_invoice_paid(client: httpx.AsyncClient, factory: Factory) -> None:
    # payments.py: "An invoice is paid when its recorded payments reach its amount".
    c = Caller(client, await factory.workspace(roles=("owner",)))
    vendor, invoice = await _approved_invoice(c)
    status, body = await c.raw("entity_crud", "finance", "invoice", "update", {"id": invoice["id"], "status": "paid"})
    assert status == 409 and body["success"] is False, (status, body)
    statement = await c.ok("report_query", "finance", "vendor", "statement", {"vendor_id": vendor["id"]})
    aging = await c.ok("report_query", "finance", "invoice", "agingApSummary", {"as_of": "2024-02-15"})
    # The statement and the aging must agree on what is owed.
    assert statement["open_balance_cents"] == [{"currency": "USD", "amount_cents": 100_000}]
    assert aging["invoice_count"] == 1


async def test_an_empty_reference_id_is_not_found_not_a_conflict(client: httpx.AsyncClient, factory: Factory) -> None:
    # `if values.get("payer_id")` skips the check for "", and the foreign key then answers a generic 409
    # "the change conflicts with an existing record": there is no such record, and no conflict.
    c = Caller(client, await factory.workspace(roles=("owner",)))
    status, body = await c.raw("entity_crud", "claims", "patient", "create",
                               {"member_id": "M-1", "name": "Jordan", "payer_id": ""})
    assert status in (400, 404), (status, body)
    document = await c.ok("document_op", "documents", "document", "upload", {"title": "t", "content": "hello"})
    status, body = await c.raw("entity_crud", "documents", "document", "update",
                               {"id": document["id"], "collection_id": ""})
    assert status in (400, 404), (status, body)


async def test_invoice_update_neither_voids_nor_disputes_without_the_reason_nor_changes_nothing(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    _vendor, invoice = await _approved_invoice(c)
    for status, action in (("void", "void"), ("disputed", "dispute")):
        message = await c.refused(409, "invalid_transition", "entity_crud", "finance", "invoice", "update",
                                  {"id": invoice["id"], "status": status})
        assert f"invoice/{action}" in message
    await c.refused(400, "invalid_arguments", "entity_crud", "finance", "invoice", "update", {"id": invoice["id"]})
    await c.ok("workflow_action", "finance", "invoice", "dispute", {"id": invoice["id"], "reason": "wrong qty"})
    await c.refused(409, "invalid_transition", "entity_crud", "finance", "invoice", "update",
                    {"id": invoice["id"], "status": "received"})
    assert (await c.read("finance", "invoice", invoice["id"]))["memo"] == "Disputed: wrong qty"
