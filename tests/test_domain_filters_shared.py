"""An entity's list, count and breakdown take the same filters, also where the app writes its own list
(finance invoices, spare parts): one filter model each, filtered the same way."""

from __future__ import annotations

from typing import Any

import httpx

from tests.domain_support import Caller
from tests.factories import Factory


async def _same_answers(c: Caller, app: str, entity: str, by: str, filters: dict[str, Any]) -> int:
    listed = await c.ok("entity_crud", app, entity, "list", filters)
    counted = await c.ok("entity_crud", app, entity, "count", filters)
    broken = await c.ok("report_query", app, entity, "breakdown", {**filters, "by": by})
    assert listed["total"] == counted["count"] == broken["total"], (filters, listed, counted, broken)
    return int(counted["count"])


async def test_invoices_and_spare_parts_list_count_and_break_down_by_the_same_filters(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    vendor = await c.create("finance", "vendor", {"name": "Acme"})
    for number, currency, due, amount in (("A-1", "USD", "2024-01-10", 100), ("A-2", "EUR", "2024-03-10", 900),
                                          ("A-3", "USD", "2024-05-10", 5_000)):
        await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": number, "currency": currency,
                                              "amount_cents": amount, "issue_date": "2024-01-01", "due_date": due})
    invoices = {"due_before": ("2024-04-01", 2), "currency": ("USD", 2), "amount_cents_min": (900, 2),
                "vendor_id": (vendor["id"], 3), "status": ("received", 3)}
    for name, (value, expected) in invoices.items():
        assert await _same_answers(c, "finance", "invoice", "currency", {name: value}) == expected, name
    assert await _same_answers(c, "finance", "invoice", "status", {"due_before": "2024-04-01",
                                                                  "currency": "USD"}) == 1
    for sku, quantity in (("P-1", 1), ("P-2", 9)):
        await c.create("spare_parts", "spare_part", {"sku": sku, "name": sku, "quantity": quantity,
                                                     "reorder_level": 2, "location": "Dock"})
    assert await _same_answers(c, "spare_parts", "spare_part", "location", {"below_reorder_level": True}) == 1
    assert await _same_answers(c, "spare_parts", "spare_part", "status", {"below_reorder_level": False,
                                                                         "location": "Dock"}) == 1
    for app, entity in (("finance", "invoice"), ("spare_parts", "spare_part")):
        for operation in ("list", "count"):
            await c.refused(400, "invalid_arguments", "entity_crud", app, entity, operation, {"due_date_before": "x"})
