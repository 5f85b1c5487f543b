from __future__ import annotations

import httpx

from tests.factories import Factory


async def test_ping_needs_no_key(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/dev/ping/")
    assert r.status_code == 200
    assert r.json()["version"] == "v1"


async def test_create_then_read_spare_part_on_canonical_path(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    r = await client.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers(), json={
        "app": "spare_parts", "entity": "spare_part", "operation": "create",
        "arguments": {"sku": "A-1", "name": "Widget", "quantity": 3}})
    assert r.status_code == 200, r.text
    part = r.json()["data"]
    r = await client.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers("viewer"), json={
        "app": "spare_parts", "entity": "spare_part", "operation": "read", "arguments": {"id": part["id"]}})
    assert r.json() == {"success": True, "data": part, "tool_name": "prism_entity_crud"}
