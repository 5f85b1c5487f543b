"""The legacy HTTP+SSE transport driven for real, over raw ASGI (the stream stays open while
messages are POSTed to the endpoint it announced) and over a real `prism serve` process."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from tests.factories import Factory, Workspace
from tests.live_prism import GENEROUS_LIMITS
from tests.processes import ServerPool, clean_env
from tests.test_mcp_protocol import PATH


class Stream:
    """A legacy SSE stream opened with a hand-made GET: its events are read while the test POSTs messages."""

    def __init__(self, app: Any, ws: Workspace, label: str = "owner") -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in ws.headers(label).items()]
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.gone = asyncio.Event()
        self.buffer = b""
        self.task: asyncio.Task[None] | None = None

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            await self.chunks.put(message.get("body", b""))
            if not message.get("more_body"):
                await self.chunks.put(None)

    async def __aenter__(self) -> Stream:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                 "scheme": "http", "path": PATH, "raw_path": PATH.encode(), "query_string": b"",
                 "root_path": "", "headers": self.headers, "client": ("127.0.0.1", 50000),
                 "server": ("127.0.0.1", 80)}
        self.task = asyncio.create_task(self.app(scope, self.receive, self.send))
        return self

    async def __aexit__(self, *_: Any) -> None:
        self.gone.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)

    async def event(self, within: float = 5) -> tuple[str, str]:
        """The next event (keep-alive comments skipped) as (event name, data)."""
        while True:
            while b"\n\n" not in self.buffer:
                chunk = await asyncio.wait_for(self.chunks.get(), within)
                assert chunk is not None, "the stream ended"
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\n\n", 1)
            lines = raw.decode().split("\n")
            if not lines[0].startswith(":"):
                return lines[0].removeprefix("event: "), lines[1].removeprefix("data: ")


async def test_a_request_refused_for_its_params_is_answered_on_the_stream_not_on_the_post(
        app: Any, client: httpx.AsyncClient, factory: Factory) -> None:
    """On the legacy transport the client waits for every answer on the stream (docs/mcp.md: "On the legacy SSE
    transport nothing is ever answered on the POST"), and an error names the request's id whenever it could be
    read, "a `params` that is not an object, alone or in a batch". In a batch that refusal does arrive on the
    stream; alone it is answered only in the POST's 400 body, so the client never sees an answer for id 3 (the
    official SDK's SSE client even stops posting altogether on a non-2xx POST)."""
    ws = await factory.workspace()
    async with Stream(app, ws) as stream:
        kind, endpoint = await stream.event()
        assert kind == "endpoint"
        headers = {**ws.headers(), "Content-Type": "application/json"}
        batched = await client.post(endpoint, headers=headers,
                                    json=[{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": []}])
        assert batched.status_code == 202
        assert '"id":2' in (await stream.event())[1]  # in a batch: on the stream, as it should be
        alone = await client.post(endpoint, headers=headers,
                                  json={"jsonrpc": "2.0", "id": 3, "method": "ping", "params": []})
        assert alone.status_code == 202, (alone.status_code, alone.text)
        kind, data = await stream.event()
        assert kind == "message" and '"id":3' in data and '"code":-32602' in data


async def test_sigterm_ends_open_legacy_streams_so_the_server_stops(database_url: str, tmp_path: Path,
                                                                   factory: Factory) -> None:
    """docs/deploy.md (rolling upgrade): "A legacy SSE stream already open on node B stays there until node B
    stops. Stop it gracefully: SIGTERM ... Uvicorn stops accepting, finishes the requests in flight and stops".
    A legacy stream never finishes by itself, and Uvicorn waits for open connections before the app's shutdown:
    without a grace period the node kept writing keep-alives after SIGTERM and never exited while the client
    stayed. PRISM_SHUTDOWN_GRACE_SECONDS bounds the wait."""
    pool = ServerPool(tmp_path)
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_CREDENTIAL_CACHE_SECONDS="0",
                    PRISM_WEBHOOK_WORKER_IN_PROCESS="false", PRISM_MCP_SSE_KEEPALIVE_SECONDS="1",
                    PRISM_SHUTDOWN_GRACE_SECONDS="2", **GENEROUS_LIMITS)
    server = pool.start(env=env)
    try:
        ws = await factory.workspace()
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as c, \
                c.stream("GET", PATH, headers=ws.headers()) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert await lines.__anext__() == "event: endpoint"
            server.proc.terminate()
            stopped = time.monotonic()
            ended = False
            try:
                async with asyncio.timeout(10):
                    async for _ in lines:
                        pass
                ended = True
            except httpx.RemoteProtocolError:  # ended after the grace period: cut, as any request still running
                ended = True
            except TimeoutError:
                pass
            still_running = server.proc.poll() is None
            waited = round(time.monotonic() - stopped, 1)
        assert ended, f"the stream was still open {waited} s after SIGTERM (server running: {still_running})"
        server.proc.wait(timeout=10)  # and the node stops
    finally:
        pool.stop_all()
