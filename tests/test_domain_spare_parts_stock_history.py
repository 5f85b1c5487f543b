"""spare_parts: every change of a part's stock leaves a movement, whichever handler makes it (its creation with
stock too), and a part with stock history cannot be deleted (its movements would go with it)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.domain_support import Caller
from tests.factories import Factory


async def _history(c: Caller, part_id: str) -> list[tuple[str, int, int, str]]:
    listed = await c.ok("entity_crud", "spare_parts", "stock_movement", "list",
                        {"spare_part_id": part_id, "ordering": "created_at", "page_size": 100})
    return [(m["kind"], m["quantity_change"], m["quantity_after"], m["reference"]) for m in listed["items"]]


async def test_work_order_parts_and_updates_of_the_quantity_record_stock_movements(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    asset = await c.create("maintenance", "asset", {"tag": "CMP-1", "name": "Compressor"})
    order = await c.create("maintenance", "work_order", {"asset_id": asset["id"], "title": "Filter change"})
    part = await c.create("spare_parts", "spare_part", {"sku": "FLT", "name": "Filter", "quantity": 10})
    line: dict[str, Any] = await c.create("maintenance", "work_order_part", {
        "work_order_id": order["id"], "spare_part_id": part["id"], "quantity": 4})
    await c.ok("entity_crud", "maintenance", "work_order_part", "delete", {"id": line["id"]})
    updated = await c.ok("entity_crud", "spare_parts", "spare_part", "update", {"id": part["id"], "quantity": 7})
    assert updated["quantity"] == 7
    await c.ok("entity_crud", "spare_parts", "spare_part", "update", {"id": part["id"], "quantity": 7,
                                                                      "location": "Bin 2"})  # no stock change
    await c.refused(400, "invalid_arguments", "entity_crud", "spare_parts", "spare_part", "update", {"id": part["id"]})
    assert await _history(c, part["id"]) == [
        ("opening", 10, 10, "spare_part/create"),
        ("issued", -4, 6, f"work order {order['id']}"),
        ("received", 4, 10, f"returned from work order {order['id']}"),
        ("adjusted", -3, 7, "spare_part/update")]


async def test_a_part_with_stock_movements_is_not_deleted_one_without_is(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    moved = await c.create("spare_parts", "spare_part", {"sku": "BLT", "name": "Belt", "quantity": 5})
    await c.ok("workflow_action", "spare_parts", "spare_part", "issueStock", {"id": moved["id"], "quantity": 1})
    message = await c.refused(409, "conflict", "entity_crud", "spare_parts", "spare_part", "delete",
                              {"id": moved["id"]})
    assert "discontinued" in message
    assert len(await _history(c, moved["id"])) == 2  # its opening stock and the issue
    assert (await c.read("spare_parts", "spare_part", moved["id"]))["quantity"] == 4
    unused = await c.create("spare_parts", "spare_part", {"sku": "NUT", "name": "Nut", "quantity": 5})
    await c.ok("entity_crud", "spare_parts", "spare_part", "delete", {"id": unused["id"]})  # opening stock only
    assert await _history(c, unused["id"]) == []  # went with it


async def test_the_stock_a_part_is_created_with_is_its_opening_movement_so_movements_add_up_to_its_quantity(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    part = await c.create("spare_parts", "spare_part", {"sku": "GSK", "name": "Gasket", "quantity": 12})
    assert await _history(c, part["id"]) == [("opening", 12, 12, "spare_part/create")]
    await c.ok("workflow_action", "spare_parts", "spare_part", "receiveStock", {"id": part["id"], "quantity": 3})
    await c.ok("workflow_action", "spare_parts", "spare_part", "issueStock", {"id": part["id"], "quantity": 5})
    await c.ok("workflow_action", "spare_parts", "spare_part", "adjustStock", {"id": part["id"],
                                                                              "counted_quantity": 9})
    history = await _history(c, part["id"])
    assert [kind for kind, *_ in history] == ["opening", "received", "issued", "adjusted"]
    assert sum(change for _, change, _, _ in history) == history[-1][2] == 9
    assert (await c.read("spare_parts", "spare_part", part["id"]))["quantity"] == 9
    by_kind = await c.ok("report_query", "spare_parts", "stock_movement", "breakdown", {"by": "kind"})
    assert {g["value"]: g["total_quantity_change"] for g in by_kind["groups"]} == {
        "opening": 12, "received": 3, "issued": -5, "adjusted": -1}
    opening = await c.ok("entity_crud", "spare_parts", "stock_movement", "list", {"kind": "opening"})
    assert [m["spare_part_id"] for m in opening["items"]] == [part["id"]]
    empty = await c.create("spare_parts", "spare_part", {"sku": "ORG", "name": "O-ring"})
    assert empty["quantity"] == 0 and await _history(c, empty["id"]) == []  # nothing moved: no movement
