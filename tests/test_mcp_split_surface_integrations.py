"""The split surface's variant check leaves to the dispatcher what does not exist for the caller: another
organization's imported operation is not found through any variant (it named its kind, unaudited)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import ok
from tests.test_mcp_protocol import PATH, headers_for, initialize, rpc

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


async def _call(client: httpx.AsyncClient, headers: dict[str, str], session: str, tool: str,
                operation: str, name: str) -> dict:
    answer = await client.post(PATH + "?tools=split", headers={**headers, "Mcp-Session-Id": session},
                               json=rpc("tools/call", {"name": tool, "arguments": {
                                   "app": name, "entity": "items", "operation": operation,
                                   "arguments": {"itemId": 7}}}))
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True
    return json.loads(result["content"][0]["text"])


async def test_another_tenants_integration_operation_is_not_found_whichever_variant_names_it(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """dispatcher.resolve_for: an imported integration the caller's organization has not enabled does not exist
    (operation_not_found), and docs/mcp.md: unknown operations are left to the dispatcher. Through a split
    variant of the wrong kind, tenant B learns that tenant A's private integration exists, and which kind each
    of its operations is (wrong_tool_variant naming the right tool), unaudited."""
    a, b = await factory.workspace(), await factory.workspace()
    name = "wh_" + uuid.uuid4().hex[:10]
    await ok(client, a, "config_manage/integrations/integration/importOpenapi",
             {"name": name, "spec": WAREHOUSE.read_text()})
    headers = headers_for(b)
    session = await initialize(client, headers, "2025-11-25")
    unknown = await _call(client, headers, session, "prism_integration_call_read", "noSuchOperation", name)
    assert unknown["error"] == "operation_not_found"
    # deleteItem exists only in tenant A's organization: for tenant B it must be just as unknown.
    other_tenants = await _call(client, headers, session, "prism_integration_call_read", "deleteItem", name)
    assert other_tenants["error"] == "operation_not_found", other_tenants
