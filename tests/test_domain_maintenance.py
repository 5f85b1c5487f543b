"""maintenance: the work-order state machine, spare parts issued from stock, preventive plans, isolation."""

from __future__ import annotations

import httpx

from tests.domain_support import Caller
from tests.factories import Factory


async def test_a_work_order_runs_open_to_done_and_refuses_moves_the_machine_does_not_allow(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    asset = await c.create("maintenance", "asset", {"tag": "PMP-01", "name": "Feed pump", "criticality": "high"})
    order = await c.create("maintenance", "work_order", {"asset_id": asset["id"], "title": "Seal leaking",
                                                         "priority": "urgent", "due_date": "2024-01-10"})
    assert order["status"] == "open"
    await c.refused(409, "invalid_transition", "workflow_action", "maintenance", "work_order", "complete",
                    {"id": order["id"], "resolution": "x"})
    await c.refused(409, "invalid_transition", "workflow_action", "maintenance", "work_order", "hold",
                    {"id": order["id"]})
    started = await c.ok("workflow_action", "maintenance", "work_order", "start", {"id": order["id"]})
    assert started["status"] == "in_progress" and started["started_at"]
    await c.ok("workflow_action", "maintenance", "work_order", "hold", {"id": order["id"]})
    await c.ok("workflow_action", "maintenance", "work_order", "start", {"id": order["id"]})  # resume
    part = await c.create("spare_parts", "spare_part", {"sku": "SEL-1", "name": "Seal", "quantity": 5,
                                                        "unit_cost_cents": 250})
    message = await c.refused(409, "insufficient_stock", "entity_crud", "maintenance", "work_order_part", "create",
                              {"work_order_id": order["id"], "spare_part_id": part["id"], "quantity": 6})
    assert "only 5" in message
    issued = await c.create("maintenance", "work_order_part", {"work_order_id": order["id"],
                                                               "spare_part_id": part["id"], "quantity": 2})
    assert issued["amount_cents"] == 500
    assert (await c.read("spare_parts", "spare_part", part["id"]))["quantity"] == 3
    assert (await c.read("maintenance", "work_order", order["id"]))["parts_cost_cents"] == 500
    await c.ok("entity_crud", "maintenance", "work_order_part", "delete", {"id": issued["id"]})  # returned
    assert (await c.read("spare_parts", "spare_part", part["id"]))["quantity"] == 5
    again = await c.create("maintenance", "work_order_part", {"work_order_id": order["id"],
                                                              "spare_part_id": part["id"], "quantity": 1})
    done = await c.ok("workflow_action", "maintenance", "work_order", "complete",
                      {"id": order["id"], "resolution": "Replaced seal", "labor_minutes": 45})
    assert (done["status"], done["labor_minutes"], done["parts_cost_cents"]) == ("done", 45, 250)
    await c.refused(409, "invalid_transition", "workflow_action", "maintenance", "work_order", "cancel",
                    {"id": order["id"], "reason": "late"})
    await c.refused(409, "invalid_transition", "entity_crud", "maintenance", "work_order_part", "delete",
                    {"id": again["id"]})
    await c.refused(409, "conflict", "entity_crud", "maintenance", "asset", "delete", {"id": asset["id"]})
    cost = await c.ok("report_query", "maintenance", "asset", "maintenanceCost", {})
    assert cost["assets"] == [{"asset_id": asset["id"], "tag": "PMP-01", "name": "Feed pump", "work_orders": 1,
                               "labor_minutes": 45, "parts_cost_cents": 250}]


async def test_due_preventive_plans_generate_work_orders_once_and_move_on(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    asset = await c.create("maintenance", "asset", {"tag": "CNV-2", "name": "Conveyor"})
    plan = await c.create("maintenance", "plan", {"asset_id": asset["id"], "title": "Grease bearings",
                                                  "interval_days": 30, "next_due": "2024-01-01"})
    await c.create("maintenance", "plan", {"asset_id": asset["id"], "title": "Yearly inspection",
                                           "interval_days": 365, "next_due": "2024-12-01"})
    generated = await c.ok("smart_action", "maintenance", "plan", "generateDueWorkOrders", {"as_of": "2024-01-15"})
    assert generated["count"] == 1
    [order] = generated["created"]
    assert (order["title"], order["kind"], order["plan_id"], order["due_date"]) == (
        "Grease bearings", "preventive", plan["id"], "2024-01-01")
    assert (await c.read("maintenance", "plan", plan["id"]))["next_due"] == "2024-01-31"
    again = await c.ok("smart_action", "maintenance", "plan", "generateDueWorkOrders", {"as_of": "2024-01-15"})
    assert again["count"] == 0
    backlog = await c.ok("report_query", "maintenance", "work_order", "backlog", {"as_of": "2024-01-15"})
    assert backlog["open"] == 1 and backlog["overdue"][0]["days_overdue"] == 14
    await c.ok("workflow_action", "maintenance", "asset", "retire", {"id": asset["id"]})
    await c.refused(409, "invalid_transition", "workflow_action", "maintenance", "asset", "markDown",
                    {"id": asset["id"]})
    await c.refused(409, "conflict", "entity_crud", "maintenance", "work_order", "create",
                    {"asset_id": asset["id"], "title": "x"})


async def test_another_organizations_assets_parts_and_work_orders_are_not_found(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs = Caller(client, (await factory.workspace(roles=("owner",))))
    asset = await theirs.create("maintenance", "asset", {"tag": "T-1", "name": "Theirs"})
    order = await theirs.create("maintenance", "work_order", {"asset_id": asset["id"], "title": "Theirs"})
    part = await theirs.create("spare_parts", "spare_part", {"sku": "P", "name": "Part", "quantity": 9})
    my_asset = await mine.create("maintenance", "asset", {"tag": "M-1", "name": "Mine"})
    my_order = await mine.create("maintenance", "work_order", {"asset_id": my_asset["id"], "title": "Mine"})
    await mine.refused(404, "not_found", "entity_crud", "maintenance", "work_order", "create",
                       {"asset_id": asset["id"], "title": "x"})
    await mine.refused(404, "not_found", "workflow_action", "maintenance", "work_order", "start", {"id": order["id"]})
    await mine.refused(404, "not_found", "entity_crud", "maintenance", "work_order_part", "create",
                       {"work_order_id": my_order["id"], "spare_part_id": part["id"], "quantity": 1})
    assert (await theirs.read("spare_parts", "spare_part", part["id"]))["quantity"] == 9
    listed = await mine.ok("entity_crud", "maintenance", "work_order", "list", {})
    assert [o["id"] for o in listed["items"]] == [my_order["id"]]
    assert (await mine.ok("report_query", "maintenance", "work_order", "backlog", {}))["open"] == 1


async def test_meter_trend_and_parts_usage_summarise_the_recorded_readings_and_movements(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    asset = await c.create("maintenance", "asset", {"tag": "FAN-1", "name": "Exhaust fan"})
    for value, hour in ((2.0, "08"), (6.5, "09"), (4.5, "10")):
        await c.create("maintenance", "meter_reading", {"asset_id": asset["id"], "meter": "vibration", "unit": "mm/s",
                                                        "value": value, "read_at": f"2024-06-01T{hour}:00:00Z"})
    trend = await c.ok("report_query", "maintenance", "meter_reading", "trend", {"asset_id": asset["id"]})
    assert trend["series"] == [{"asset_id": asset["id"], "meter": "vibration", "unit": "mm/s", "readings": 3,
                                "min": 2.0, "max": 6.5, "average": 4.333333, "latest": 4.5,
                                "latest_at": "2024-06-01T10:00:00Z"}]
    belt = await c.create("spare_parts", "spare_part", {"sku": "BLT", "name": "Belt", "quantity": 10})
    seal = await c.create("spare_parts", "spare_part", {"sku": "SEL", "name": "Seal", "quantity": 10})
    await c.ok("workflow_action", "spare_parts", "spare_part", "issueStock", {"id": belt["id"], "quantity": 2})
    await c.ok("workflow_action", "spare_parts", "spare_part", "issueStock", {"id": seal["id"], "quantity": 7})
    await c.ok("workflow_action", "spare_parts", "spare_part", "receiveStock", {"id": seal["id"], "quantity": 5})
    await c.refused(409, "insufficient_stock", "workflow_action", "spare_parts", "spare_part", "issueStock",
                    {"id": belt["id"], "quantity": 9})
    adjusted = await c.ok("workflow_action", "spare_parts", "spare_part", "adjustStock",
                          {"id": belt["id"], "counted_quantity": 7, "reference": "count"})
    assert (adjusted["movement"]["quantity_change"], adjusted["spare_part"]["quantity"]) == (-1, 7)
    usage = await c.ok("report_query", "spare_parts", "stock_movement", "usage", {})
    assert [(p["sku"], p["units_issued"], p["issues"], p["units_received"]) for p in usage["parts"]] == [
        ("SEL", 7, 1, 5), ("BLT", 2, 1, 0)]
