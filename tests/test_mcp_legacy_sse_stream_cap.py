"""Legacy SSE streams one credential may hold open in a process (PRISM_MCP_SSE_MAX_STREAMS_PER_CREDENTIAL): each
holds a task, a socket and, on Redis, a subscription, so a client opening streams without end would exhaust them
for every tenant. Past the cap the GET is refused 429; other credentials are not affected; a closed stream frees
its place."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import httpx

from tests.factories import Factory
from tests.test_mcp_legacy_sse_refusals_and_shutdown import PATH, Stream


async def test_a_credential_holds_at_most_the_cap_of_open_streams(
        app: Any, client: httpx.AsyncClient, factory: Factory) -> None:
    cap = app.state.settings.mcp_sse_max_streams_per_credential
    ws = await factory.workspace(roles=("owner", "member"))
    async with AsyncExitStack() as held:
        streams = [await held.enter_async_context(Stream(app, ws)) for _ in range(cap)]
        for stream in streams:
            assert (await stream.event())[0] == "endpoint"
        refused = await client.get(PATH, headers=ws.headers())
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["data"]["error"] == "too_many_streams"
        # Another credential of the same tenant still opens one.
        async with Stream(app, ws, "member") as other:
            assert (await other.event())[0] == "endpoint"
        # A stream that closes frees its place.
        await streams.pop().__aexit__(None, None, None)
        async with Stream(app, ws) as again:
            assert (await again.event())[0] == "endpoint"
