"""A legacy SSE client that never reads its stream: the answers to its POSTs cannot be written (the first write
waits for the client), and must not pile up in memory without end. Past MAX_PENDING_BYTES the stream is ended
and closed, its claim dropped: its POSTs answer 404 (docs/mcp.md, Legacy HTTP+SSE)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from prism.mcp_server.legacy_sse import MAX_PENDING_BYTES, LegacyStreams
from tests.factories import Factory, Workspace
from tests.test_mcp_legacy_sse_refusals_and_shutdown import Stream

# Nine answers of 100 kB each, cheap to make: the refusal of an unknown method names it.
BATCH = [{"jsonrpc": "2.0", "id": i, "method": f"{i}{'x' * 100_000}"} for i in range(9)]


class UnreadStream(Stream):
    """A stream whose client reads the `endpoint` event and nothing after: every later write waits."""

    def __init__(self, app: Any, ws: Workspace) -> None:
        super().__init__(app, ws)
        self.writes = 0
        self.read_again = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            self.writes += 1
            if self.writes > 1:
                await self.read_again.wait()
        await super().send(message)

    async def __aexit__(self, *args: Any) -> None:
        self.read_again.set()
        await super().__aexit__(*args)


async def test_a_stream_whose_client_never_reads_is_ended_before_its_answers_outgrow_the_bound(
        app: Any, client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = {**ws.headers(), "Content-Type": "application/json"}
    async with UnreadStream(app, ws) as stream:
        kind, endpoint = await stream.event()
        assert kind == "endpoint"
        stream_id = endpoint.split("session_id=")[1]
        streams: LegacyStreams = app.state.mcp_streams
        accepted = 0
        while (answer := await client.post(endpoint, headers=headers, json=BATCH)).status_code == 202:
            accepted += 1
            assert accepted < 100, f"{accepted} POSTs accepted by a stream nobody reads"
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["data"]["error"] == "session_not_found"
        assert len(streams) == 0
        for _ in range(500):  # the claim is dropped in the background, a round trip to the store
            if await streams.relay.owner(stream_id) is None:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the ended stream is still claimed")


async def test_a_stream_whose_client_reads_takes_answers_past_the_bound_over_time(
        app: Any, client: httpx.AsyncClient, factory: Factory) -> None:
    """The bound is on answers waiting, not on all a stream ever carries."""
    ws = await factory.workspace()
    headers = {**ws.headers(), "Content-Type": "application/json"}
    async with Stream(app, ws) as stream:
        kind, endpoint = await stream.event()
        carried = 0
        while carried <= 2 * MAX_PENDING_BYTES:
            answer = await client.post(endpoint, headers=headers, json=BATCH)
            assert answer.status_code == 202, answer.text
            for _ in BATCH:
                kind, data = await stream.event()
                assert kind == "message" and "Method not found" in data
                carried += len(data)
