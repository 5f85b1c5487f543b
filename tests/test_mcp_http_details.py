"""HTTP-level negotiation of the MCP door: Accept with quality values, an empty ?tools=, a batch of refused
notifications."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.test_mcp_protocol import PATH, call, headers_for, initialize, rpc


async def test_an_accept_that_refuses_json_with_q_0_gets_an_event_stream(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """RFC 9110 §12.4.2: a qvalue of 0 means "not acceptable". A client that says `application/json;q=0,
    text/event-stream` takes only the event stream (docs/mcp.md: JSON or a one-shot event stream by Accept);
    it is answered with the event stream."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    answer = await client.post(PATH, headers={**headers, "Mcp-Session-Id": session,
                                              "Accept": "application/json;q=0, text/event-stream"}, json=rpc("ping"))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")


async def test_an_accept_that_refuses_both_types_with_q_0_is_406(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    answer = await client.post(PATH, headers={**headers, "Mcp-Session-Id": session,
                                              "Accept": "application/json;q=0, text/event-stream;q=0"},
                               json=rpc("ping"))
    assert answer.status_code == 406


async def test_an_empty_tools_surface_is_refused_like_any_other_value(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """docs/mcp.md: `?tools=mega|split` on the MCP URL; any other value is 400 invalid_tool_surface.
    `?tools=` (empty) is silently dropped by parse_qs and the default surface is served."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, "2025-11-25")
    answer = await client.post(PATH + "?tools=", headers={**headers, "Mcp-Session-Id": session},
                               json=rpc("tools/list"))
    assert answer.status_code == 400
    assert answer.json()["error"]["data"]["error"] == "invalid_tool_surface"


async def test_a_batch_of_only_refused_notifications_is_not_accepted_with_202(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """MCP 2025-03-26 transports, "Sending Messages to the Server": input made solely of notifications or
    responses gets 202 only if the server accepts it, else an HTTP error status. Prism refuses the same
    notification sent alone (400, params not an object) but answers 202 when it is the whole batch."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, "2025-03-26")
    bad = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1]}
    alone = await call(client, headers, session, bad)
    assert alone.status_code == 400
    batched = await call(client, headers, session, [bad])
    assert batched.status_code == 400, (batched.status_code, batched.text)
