"""docs/mcp.md "Authentication, CORS, limits": the MCP door answers a browser's preflight with CORS headers a
browser accepts. The Fetch standard fails a CORS check whose Access-Control-Allow-Origin holds more than one
value, so each CORS header must appear once."""

from __future__ import annotations

import httpx

PATH = "/api/mcp/sse"


async def test_the_mcp_preflight_sends_each_cors_header_once(client: httpx.AsyncClient) -> None:
    preflight = await client.options(PATH, headers={
        "Origin": "http://localhost", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-session-id"})
    assert preflight.status_code == 204
    for name in ("access-control-allow-origin", "access-control-expose-headers", "access-control-allow-methods",
                 "access-control-allow-headers"):
        values = preflight.headers.get_list(name)
        assert len(values) == 1, (name, values)
    assert preflight.headers["access-control-allow-origin"] == "*"
