"""A deployment's integration (imported with the CLI, any organization may connect) exists, for an organization,
only once it connects to it (docs/integrations.md "Each organization enables what it uses"): until then none of
its handlers is listed, described, counted or found for it on any door, and a call answers as for a coordinate
nobody declared. `integration/list` does show it, as the integrations the organization may connect to."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism.config import Settings
from tests.deployment_imports import imported_for_the_deployment
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.test_mcp_protocol import PATH as MCP_PATH
from tests.test_mcp_protocol import call, headers_for, initialize, rpc

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
INTROSPECT = "report_query/core/registry/introspect"


async def _surfaces(client: httpx.AsyncClient, ws: Workspace) -> dict[str, str]:
    """Every place a caller learns what it may call, as text."""
    seen = {"dev/tools": (await client.get("/api/v1/dev/tools/", headers=ws.headers())).text,
            "descriptor": (await client.get("/.well-known/openapi.json", headers=ws.headers())).text,
            "apps": str(await ok(client, ws, INTROSPECT, {"dimension": "apps"})),
            "search": str(await ok(client, ws, INTROSPECT, {"dimension": "capability_search", "rerank": False,
                                                            "query": "list stock items in the warehouse bins"}))}
    for surface in ("mega", "split"):
        headers = headers_for(ws)
        session = await initialize(client, headers, "2025-11-25")
        listed = await client.post(f"{MCP_PATH}?tools={surface}", json=rpc("tools/list", {}),
                                   headers={**headers, "Mcp-Session-Id": session})
        seen[f"tools/list {surface}"] = listed.text
        searched = await call(client, headers, session, rpc("tools/call", {
            "name": "prism_search", "arguments": {"query": "list stock items in the warehouse"}}, request_id=2))
        seen[f"prism_search {surface}"] = searched.text
    return seen


async def test_an_organization_that_has_not_connected_sees_none_of_a_deployment_integration(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, app: Any) -> None:
    connected, bystander = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    name = "wh_" + uuid.uuid4().hex[:10]
    offered = await imported_for_the_deployment(client, bystander, settings, WAREHOUSE, name)
    assert [i["owner"] for i in offered if i["name"] == name] == ["deployment"]
    await ok(client, connected, "config_manage/integrations/connection/set",
             {"name": name, "base_url": "https://93.184.215.14"})

    assert all(name in text for text in (await _surfaces(client, connected)).values())
    leaked = [where for where, text in (await _surfaces(client, bystander)).items() if name in text]
    assert leaked == []
    stats = await ok(client, bystander, INTROSPECT, {"dimension": "stats"})
    assert stats["handlers_total"] == len([h for h in app.state.registry if h.integration is None])

    # A call answers as for an integration nobody imported, arguments unread.
    nobody = "wh_" + uuid.uuid4().hex[:10]
    for arguments in ({}, {"nothing": True}):
        refused = await post(client, bystander, f"integration_call/{name}/items/listItems", arguments)
        undeclared = await post(client, bystander, f"integration_call/{nobody}/items/listItems", arguments)
        assert refused.status_code == undeclared.status_code == 404, refused.text
        assert refused.json() == {**undeclared.json(), "message": undeclared.json()["message"].replace(nobody, name)}
