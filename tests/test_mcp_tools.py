"""MCP tools/list and tools/call: per-caller tool lists, pagination, and calls through the one dispatcher."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from sqlalchemy import select

from prism.app import create_app
from prism.config import Settings
from prism.models.audit import AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.test_mcp_protocol import LIST_PARTS, call, headers_for, initialize, rpc, tool_text

ALL_MEGA_TOOL_DOORS = 13


async def list_all(client: httpx.AsyncClient, ws: Workspace, label: str = "owner",
                   version: str = "2025-11-25") -> list[dict[str, Any]]:
    headers = headers_for(ws, label)
    session = await initialize(client, headers, version)
    answer = await call(client, headers, session, rpc("tools/list"))
    result = answer.json()["result"]
    assert "nextCursor" not in result
    tools: list[dict[str, Any]] = result["tools"]
    return tools


async def call_tool(client: httpx.AsyncClient, ws: Workspace, name: str, arguments: dict[str, Any],
                    label: str = "owner") -> httpx.Response:
    headers = headers_for(ws, label)
    session = await initialize(client, headers)
    return await call(client, headers, session, rpc("tools/call", {"name": name, "arguments": arguments}))


async def test_every_listed_tool_has_a_title_schema_and_hints(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    tools = {t["name"]: t for t in await list_all(client, ws)}
    assert {"prism_entity_crud", "prism_report_query", "prism_whoami", "prism_introspect", "prism_search"} <= set(tools)
    assert len(tools) <= ALL_MEGA_TOOL_DOORS + 3
    for tool in tools.values():
        assert tool["title"] and tool["description"] and tool["inputSchema"]["type"] == "object"
        assert set(tool["annotations"]) >= {"readOnlyHint", "destructiveHint"}
    crud = tools["prism_entity_crud"]
    assert set(crud["inputSchema"]["required"]) == {"operation", "app", "entity"}
    assert crud["annotations"]["readOnlyHint"] is False and crud["annotations"]["destructiveHint"] is True
    assert tools["prism_whoami"]["annotations"]["readOnlyHint"] is True


async def test_a_viewer_sees_only_read_only_tools_and_fewer_operations(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    owner = {t["name"]: t for t in await list_all(client, ws, "owner")}
    viewer = {t["name"]: t for t in await list_all(client, ws, "viewer")}
    assert set(viewer) <= set(owner)
    assert all(t["annotations"]["readOnlyHint"] for t in viewer.values())
    assert "delete" not in viewer["prism_entity_crud"]["inputSchema"]["properties"]["operation"]["enum"]


async def test_a_key_without_the_read_scope_sees_no_read_tools(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    await factory.add_key(ws, "writer", scopes="mcp:write")
    names = {t["name"] for t in await list_all(client, ws, "writer")}
    assert "prism_whoami" not in names and "prism_report_query" not in names
    assert "prism_entity_crud" in names


async def test_tools_list_pages_with_an_opaque_cursor(settings: Settings, factory: Factory) -> None:
    paged = create_app(settings.model_copy(update={"mcp_tools_page_size": 2}))
    async with paged.router.lifespan_context(paged):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=paged), base_url="http://localhost") as c:
            ws = await factory.workspace()
            headers = headers_for(ws)
            session = await initialize(c, headers)
            seen: list[str] = []
            cursor = None
            for _ in range(20):
                params: dict[str, Any] = {"cursor": cursor} if cursor else {}
                result = (await call(c, headers, session, rpc("tools/list", params))).json()["result"]
                assert len(result["tools"]) <= 2
                seen += [t["name"] for t in result["tools"]]
                cursor = result.get("nextCursor")
                if cursor is None:
                    break
            assert seen == sorted(seen) and len(seen) == len(set(seen)) >= 4
            for bad in ("garbage!", base64.urlsafe_b64encode(b"x:1").decode(), 5):
                answer = await call(c, headers, session, rpc("tools/list", {"cursor": bad}))
                assert answer.json()["error"]["code"] == -32602


async def test_a_cursor_whose_offset_is_not_ascii_digits_is_invalid_params(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """"²" passes str.isdigit() and fails int(); so do a few thousand digits: neither is an internal error."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    for offset in ("²", "1²", "-1", " 1", "1_0", "9" * 5000):
        cursor = base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()
        answer = await call(client, headers, session, rpc("tools/list", {"cursor": cursor}))
        assert answer.json()["error"]["code"] == -32602, (offset[:10], answer.text)
        assert answer.json()["error"]["data"]["error"] == "invalid_cursor"


async def test_a_ledger_number_the_database_cannot_store_is_invalid_arguments_not_an_internal_error(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    for operation, arguments in (("list", {"seq_from": 2**63}), ("list", {"seq_to": 2**63}),
                                 ("read", {"id": 2**63}), ("export", {"seq_from": 2**63})):
        answer = await call_tool(client, ws, "prism_audit_query", {
            "app": "ledger", "entity": "entry", "operation": operation, "arguments": arguments})
        assert "error" not in answer.json(), (operation, answer.text)
        is_error, body = tool_text(answer)
        assert is_error is True and body["error"] == "invalid_arguments", (operation, body)
        assert next(iter(arguments)) in body["message"], (operation, body)


async def test_a_read_call_returns_the_prism_response_and_is_audited_with_door_mcp(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    is_error, body = tool_text(await call_tool(client, ws, "prism_entity_crud", LIST_PARTS))
    assert is_error is False
    assert body["success"] is True and body["tool_name"] == "prism_entity_crud" and "items" in body["data"]
    async with db.read() as s:
        entries = (await s.execute(select(AuditEntry).where(AuditEntry.organization_id == ws.org.id))).scalars().all()
    assert [(e.door, e.outcome, e.coordinate) for e in entries] == [
        ("mcp", "allowed", "entity_crud/spare_parts/spare_part/list")]


async def test_a_write_through_mcp_is_visible_through_rest_and_only_in_its_own_tenant(
        client: httpx.AsyncClient, factory: Factory) -> None:
    a, b = await factory.workspace(), await factory.workspace()
    created = await call_tool(client, a, "prism_entity_crud", {
        "app": "spare_parts", "entity": "spare_part", "operation": "create",
        "arguments": {"sku": "MCP-1", "name": "Made over MCP"}})
    is_error, body = tool_text(created)
    assert is_error is False and body["data"]["sku"] == "MCP-1"
    rest = await client.post("/api/mcp/tools/prism_entity_crud/", headers=a.headers(), json=LIST_PARTS)
    assert [p["sku"] for p in rest.json()["data"]["items"]] == ["MCP-1"]
    _, other = tool_text(await call_tool(client, b, "prism_entity_crud", LIST_PARTS))
    assert other["data"]["items"] == []
    _, missing = tool_text(await call_tool(client, b, "prism_entity_crud", {
        "app": "spare_parts", "entity": "spare_part", "operation": "read", "arguments": {"id": body["data"]["id"]}}))
    assert missing["error"] == "not_found"


async def test_a_refused_call_is_an_is_error_result_carrying_the_error_code(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace()
    refused = await call_tool(client, ws, "prism_entity_crud", {
        "app": "spare_parts", "entity": "spare_part", "operation": "create",
        "arguments": {"sku": "NO", "name": "Viewer cannot"}}, label="viewer")
    assert refused.status_code == 200
    is_error, body = tool_text(refused)
    assert is_error is True and body["success"] is False and body["error"] == "permission_denied"
    async with db.read() as s:
        outcomes = (await s.execute(select(AuditEntry.outcome, AuditEntry.error_code)
                                    .where(AuditEntry.organization_id == ws.org.id))).all()
    assert [tuple(o) for o in outcomes] == [("refused", "permission_denied")]


async def test_invalid_arguments_name_the_field(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    is_error, body = tool_text(await call_tool(client, ws, "prism_entity_crud", {
        "app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {"page_size": 0}}))
    assert is_error is True and body["error"] == "invalid_arguments" and "page_size" in body["message"]
    is_error, body = tool_text(await call_tool(client, ws, "prism_entity_crud", {"app": "spare_parts"}))
    assert is_error is True and body["error"] == "invalid_arguments"


async def test_utility_tools_take_flat_parameters(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    _, me = tool_text(await call_tool(client, ws, "prism_whoami", {}))
    assert me["data"]["tenant"]["subdomain"] == ws.tenant.subdomain
    _, found = tool_text(await call_tool(client, ws, "prism_introspect", {"dimension": "mega_tools"}))
    assert found["success"] is True


async def test_an_unknown_tool_is_a_json_rpc_invalid_params_error(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await call_tool(client, ws, "prism_nope", {})
    assert answer.json()["error"]["code"] == -32602
    assert answer.json()["error"]["data"]["error"] == "tool_not_found"
    headers = headers_for(ws)
    session = await initialize(client, headers)
    for params in ({}, {"name": "prism_whoami", "arguments": [1]}):
        bad = await call(client, headers, session, rpc("tools/call", params))
        assert bad.json()["error"]["code"] == -32602
