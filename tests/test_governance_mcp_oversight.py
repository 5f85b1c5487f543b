"""An approved oversight request reaches the utility tools over MCP, beside their flat parameters."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.governance_support import governed_key, ok
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text

GATED_INTROSPECTION = {"name": "gated-introspection", "default": "allow",
                       "oversight": ["report_query/core/registry/introspect"]}


async def test_an_approved_utility_tool_call_can_be_repeated_over_mcp(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    """docs/governance.md: "The MCP door takes mission_id and oversight_request_id in the tool arguments' envelope
    (it has no per-call headers)". For prism_introspect (flat parameters) the field is taken as a parameter of the
    tool, so an approval can never be used over MCP: the agent is refused for ever."""
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona=GATED_INTROSPECTION)
    headers = headers_for(ws, "agent")
    session = await initialize(client, headers)
    arguments = {"dimension": "apps"}

    first = await call(client, headers, session, rpc("tools/call", {"name": "prism_introspect",
                                                                     "arguments": arguments}))
    is_error, body = tool_text(first)
    assert is_error and body["error"] == "oversight_required", body
    request_id = body["details"]["oversight_request_id"]
    approved = await ok(client, ws, "governance_review/governance/oversight_request/approve",
                        {"id": request_id, "note": "fine"})  # by the workspace owner, another person
    assert approved["status"] == "approved"

    again = await call(client, headers, session, rpc("tools/call", {
        "name": "prism_introspect", "arguments": {**arguments, "oversight_request_id": request_id}}, request_id=2))
    is_error, body = tool_text(again)
    assert not is_error, body
