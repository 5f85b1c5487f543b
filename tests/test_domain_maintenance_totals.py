"""maintenance: a work order's parts cost stays within its 64-bit column, and totals past 2**63 are reported
exactly on both engines (SQLite's SUM() raises "integer overflow" there, PostgreSQL's is NUMERIC)."""

from __future__ import annotations

from typing import Any

import httpx

from prism.kit.numbers import SQL_BIGINT_MAX
from tests.domain_support import Caller
from tests.factories import Factory

LINE = {"quantity": 100_000}  # of a part costing 10**12 cents: 10**17 cents a line
LINES_THAT_FIT = SQL_BIGINT_MAX // 10**17  # 92


async def _order_with_full_parts(c: Caller) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    asset = await c.create("maintenance", "asset", {"tag": "PRS-1", "name": "Press"})
    part = await c.create("spare_parts", "spare_part", {"sku": "DIE", "name": "Die", "quantity": 10_000_000,
                                                        "unit_cost_cents": 10**12})
    order = await c.create("maintenance", "work_order", {"asset_id": asset["id"], "title": "Rebuild"})
    for _ in range(LINES_THAT_FIT):
        await c.create("maintenance", "work_order_part",
                       {"work_order_id": order["id"], "spare_part_id": part["id"], **LINE})
    return asset, part, order


async def test_a_part_line_that_would_take_the_order_total_past_64_bits_is_refused(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    _, part, order = await _order_with_full_parts(c)
    message = await c.refused(409, "conflict", "entity_crud", "maintenance", "work_order_part", "create",
                              {"work_order_id": order["id"], "spare_part_id": part["id"], **LINE})
    assert "another work order" in message
    assert (await c.read("maintenance", "work_order", order["id"]))["parts_cost_cents"] == LINES_THAT_FIT * 10**17
    assert (await c.read("spare_parts", "spare_part", part["id"]))["quantity"] == 10_000_000 - LINES_THAT_FIT * 100_000


async def test_breakdowns_and_cost_report_sum_past_64_bits_exactly(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    asset, part, full = await _order_with_full_parts(c)
    other = await c.create("maintenance", "work_order", {"asset_id": asset["id"], "title": "Spare die"})
    await c.create("maintenance", "work_order_part", {"work_order_id": other["id"], "spare_part_id": part["id"],
                                                      **LINE})
    whole = (LINES_THAT_FIT + 1) * 10**17  # past 2**63 - 1
    by_part = await c.ok("report_query", "maintenance", "work_order_part", "breakdown", {"by": "spare_part_id"})
    assert by_part["groups"] == [{"value": part["id"], "count": LINES_THAT_FIT + 1,
                                  "total_quantity": (LINES_THAT_FIT + 1) * 100_000, "total_amount_cents": str(whole)}]
    by_status = await c.ok("report_query", "maintenance", "work_order", "breakdown", {})
    assert by_status["groups"] == [{"value": "open", "count": 2, "total_labor_minutes": 0,
                                    "total_parts_cost_cents": str(whole)}]
    by_order = await c.ok("report_query", "maintenance", "work_order_part", "breakdown", {"by": "work_order_id"})
    assert sorted(g["total_amount_cents"] for g in by_order["groups"]) == [10**17, LINES_THAT_FIT * 10**17]
    for order in (full, other):
        await c.ok("workflow_action", "maintenance", "work_order", "start", {"id": order["id"]})
        await c.ok("workflow_action", "maintenance", "work_order", "complete", {"id": order["id"], "resolution": "ok"})
    cost = await c.ok("report_query", "maintenance", "asset", "maintenanceCost", {})
    assert cost["assets"][0]["parts_cost_cents"] == str(whole)
