"""A real upstream MCP server for the federation tests: FastMCP over HTTPS on loopback (streamable HTTP or the
legacy SSE transport), behind a header credential. `install_extra` adds a tool and tells the client, as a
server does when its tool list changes."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any, Self
from urllib.parse import parse_qs

import pytest
import uvicorn
from fastmcp import Context, FastMCP
from mcp_types import ToolListChangedNotification
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.webhooks_receiver import TlsFiles

UPSTREAM_KEY = "upstream-" + "k3y" * 8


def build_server() -> FastMCP:
    server = FastMCP("depot")
    calls: list[str] = []

    @server.tool(annotations={"readOnlyHint": True})
    def get_forecast(city: str, days: int = 1) -> dict[str, Any]:
        """Weather forecast for a city: temperature per day."""
        calls.append("get_forecast")
        return {"city": city, "days": [{"day": d + 1, "celsius": 20 + d} for d in range(days)]}

    @server.tool(annotations={"destructiveHint": False})
    def book_delivery(site: str, quantity: int) -> str:
        """Book a delivery of parts to a site."""
        calls.append("book_delivery")
        if quantity > 100:
            raise ValueError("no truck carries that many")
        return f"booked {quantity} for {site}"

    @server.tool()
    def cancel_delivery(delivery_id: str) -> str:
        """Cancel a booked delivery."""
        calls.append("cancel_delivery")
        return f"cancelled {delivery_id}"

    @server.tool(annotations={"readOnlyHint": True})
    async def slow_echo(text: str, seconds: float, ctx: Context) -> str:
        """Echo after a while."""
        await asyncio.sleep(seconds)
        return text

    @server.tool(annotations={"readOnlyHint": True})
    def big_answer(size: int) -> str:
        """A text of `size` characters."""
        return "x" * size

    @server.tool()
    async def install_extra(ctx: Context) -> str:
        """Add the track_parcel tool."""

        def track_parcel(parcel: str) -> str:
            """Where a parcel is."""
            return f"{parcel}: in transit"

        server.tool(annotations={"readOnlyHint": True})(track_parcel)
        await ctx.send_notification(ToolListChangedNotification())
        return "installed"

    server.calls = calls  # type: ignore[attr-defined]
    return server


class RequireKey:
    """Refuses every request without the upstream's credential (what a real server's gateway does): its key
    header, or, once `oauth_client` is set, a bearer token its own token endpoint (`/oauth/token`) issued for
    that client's credentials."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests = 0
        self.oauth_client: tuple[str, str] | None = None  # (client id, client secret)
        self.access_token = "mcp-at-" + "t0k" * 8
        self.tokens_issued = 0
        self.query: bytes | None = None  # once set, the query string every request must carry (a key in the URL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if scope["path"] == "/oauth/token" and self.oauth_client is not None:
                await self._token(receive, send)
                return
            self.requests += 1
            headers = dict(scope["headers"])
            if self.oauth_client is not None:
                allowed = headers.get(b"authorization") == f"Bearer {self.access_token}".encode()
            else:
                allowed = headers.get(b"x-upstream-key") == UPSTREAM_KEY.encode()
            if self.query is not None and scope["query_string"] != self.query:
                allowed = False
            if not allowed:
                await _answer(send, 401, {"error": "unauthorized"})
                return
        await self.app(scope, receive, send)

    async def _token(self, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        client_id, secret = self.oauth_client or ("", "")
        if form.get("grant_type") != "client_credentials" or (form.get("client_id"), form.get("client_secret")) != (
                client_id, secret):
            await _answer(send, 401, {"error": "invalid_client"})
            return
        self.tokens_issued += 1
        await _answer(send, 200, {"access_token": self.access_token, "token_type": "bearer", "expires_in": 3600})


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


class OnLoopback:
    """An MCP server a test runs in its own loop over HTTPS on 127.0.0.1: its subclass sets `sock` (bound), `port`
    and `uvicorn` (a Server for that socket)."""

    sock: socket.socket
    port: int
    uvicorn: uvicorn.Server
    task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mcp"

    async def start(self) -> Self:
        self.task = asyncio.create_task(self.uvicorn.serve(sockets=[self.sock]))
        while not self.uvicorn.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        self.uvicorn.should_exit = True
        if self.task is not None:
            await self.task
        self.sock.close()


class RunningMcp(OnLoopback):
    def __init__(self, tls: TlsFiles, transport: str = "http", *, json_response: bool = False) -> None:
        """`json_response`: streamable HTTP answered with one JSON document per request, not an event stream."""
        self.server = build_server()
        self.transport = transport
        http_app = (self.server.http_app(path="/mcp", json_response=True) if json_response else
                    self.server.http_app(path="/mcp", transport=transport))  # type: ignore[arg-type]
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.gate = RequireKey(http_app)
        self.uvicorn = uvicorn.Server(uvicorn.Config(self.gate, ssl_certfile=str(tls.cert),
                                                     ssl_keyfile=str(tls.key), log_level="error", lifespan="on",
                                                     timeout_graceful_shutdown=1))
        self.lifespan_app = http_app


class ScriptedMcp(OnLoopback):
    """A bare MCP server (streamable HTTP, one JSON document per answer) that sends what a test scripts, including
    what no well-behaved server sends: `tools` as listed (`endless_pages` > 0: pages of that many tools, each with
    a `nextCursor`, without end), or `tools_by_key` to a request whose X-Upstream-Key is one of its keys (an
    upstream that lists different tools to different credentials), `answers` per tool name (the call's result),
    `announcing` tools whose call answers as an event stream that first says the tool list changed, and, once
    `refusing_lists`, tools/list refused with a JSON-RPC error that echoes the request (its URL, query string
    included, and its key header), as a debugging gateway does."""

    def __init__(self, tls: TlsFiles) -> None:
        self.tools: list[dict[str, Any]] = []
        self.tools_by_key: dict[str, list[dict[str, Any]]] = {}
        self.endless_pages = 0
        self.answers: dict[str, dict[str, Any]] = {}
        self.announcing: set[str] = set()
        self.calls: list[str] = []
        self.pages_listed = 0
        self.refusing_lists = False
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.uvicorn = uvicorn.Server(uvicorn.Config(self._app, ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key),
                                                     interface="asgi3", log_level="error", lifespan="off",
                                                     timeout_graceful_shutdown=1))

    def _tools_page(self, cursor: str | None, key: str) -> dict[str, Any]:
        self.pages_listed += 1
        if not self.endless_pages:
            return {"tools": self.tools_by_key.get(key, self.tools)}
        page = int(cursor or 0)
        return {"tools": [{"name": f"t{page}_{i}", "inputSchema": {"type": "object"}}
                          for i in range(self.endless_pages)], "nextCursor": str(page + 1)}

    def _result(self, method: str, params: dict[str, Any], key: str) -> dict[str, Any]:
        if method == "initialize":
            return {"protocolVersion": params["protocolVersion"], "serverInfo": {"name": "scripted", "version": "1"},
                    "capabilities": {"tools": {"listChanged": True}}}
        if method == "tools/list":
            return self._tools_page(params.get("cursor"), key)
        self.calls.append(params["name"])
        return self.answers.get(params["name"], {"content": [{"type": "text", "text": json.dumps(params)}]})

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] != "POST":
            await _answer(send, 405, {"error": "method not allowed"})
            return
        request = json.loads(body)
        if "id" not in request:  # a notification
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        params = request.get("params") or {}
        key = dict(scope["headers"]).get(b"x-upstream-key", b"").decode()
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if request["method"] == "tools/list" and self.refusing_lists:
            sent_to = f"https://127.0.0.1:{self.port}{scope['path']}?{scope['query_string'].decode()}"
            answer["error"] = {"code": -32001, "message": f"gateway refused {sent_to} (query "
                               f"{scope['query_string'].decode()}, X-Upstream-Key: {key})"}
        else:
            answer["result"] = self._result(request["method"], params, key)
        if request["method"] == "tools/call" and params["name"] in self.announcing:
            changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            events = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in (changed, answer))
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream"), (b"mcp-session-id", b"scripted")]})
            await send({"type": "http.response.body", "body": events.encode()})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"mcp-session-id", b"scripted")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


@pytest.fixture(name="scripted")
async def scripted_fixture(tls: TlsFiles) -> AsyncIterator[ScriptedMcp]:
    """A scripted upstream MCP server on loopback for the test (import with the `tls` fixture beside it)."""
    running = await ScriptedMcp(tls).start()
    yield running
    await running.stop()
