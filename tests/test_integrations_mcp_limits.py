"""An upstream MCP server's tool list is bounded by its size, not only by its count and pages: a tool whose schema
is too large or nests too deep, a name too long, a list too large in bytes is refused whole and names the limit,
as an OpenAPI import is; a description is cut as an imported one is; an answer too large to hold is read no
further. Against real servers on loopback: FastMCP (both transports) and a scripted one for what FastMCP does
not send."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from fastmcp.tools import Tool
from sqlalchemy import select
from starlette.types import Receive, Scope, Send

from prism.integrations.mcp_limits import MAX_TOOL_LIST_BYTES, MAX_TOOL_PART_BYTES
from prism.integrations.models import IntegrationApp
from prism.integrations.openapi import DESCRIPTION_CHARS, MAX_SCHEMA_DEPTH
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.integrations_mcp_upstream import (
    UPSTREAM_KEY,
    OnLoopback,
    RunningMcp,
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    upstream_tls_fixture,
)
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

ADD = "config_manage/integrations/integration/addMcp"
READ = "config_manage/integrations/integration/read"


def nested(levels: int) -> dict[str, Any]:
    """An object schema whose innermost property sits `levels` levels of JSON below it (two per property)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels // 2):
        schema = {"type": "object", "properties": {"inner": schema}}
    return schema


def wide(size: int) -> dict[str, Any]:
    """A flat object schema of `size` bytes of JSON, give or take one property."""
    field = {"type": "string", "description": "d" * 90}
    each = len(orjson.dumps({"field_00000": field})) - 1  # the property and its comma
    return {"type": "object", "properties": {f"field_{i:05}": field for i in range(size // each)}}


def fill_form(text: str = "") -> str:
    """Fill in a form."""
    return f"filled {text}"


@pytest.fixture(params=["http", "sse"])
async def fastmcp(request: pytest.FixtureRequest, tls: TlsFiles) -> AsyncIterator[RunningMcp]:
    running = await RunningMcp(tls, transport=request.param).start()
    yield running
    await running.stop()


def serve(upstream: RunningMcp, name: str, **parts: Any) -> None:
    """Add (or replace) a tool of the FastMCP server with the given schema, description…"""
    tool = Tool.from_function(fill_form, name=name)
    with contextlib.suppress(KeyError):  # not served yet
        upstream.server.local_provider.remove_tool(name)
    upstream.server.add_tool(tool.model_copy(update=parts))


async def add_fastmcp(client: httpx.AsyncClient, ws: Workspace, upstream: RunningMcp, name: str) -> httpx.Response:
    return await post(client, ws, ADD, {
        "name": name, "url": upstream.url, "transport": "sse" if upstream.transport == "sse" else "streamable_http",
        "auth_kind": "api_key", "header": "X-Upstream-Key", "secret": UPSTREAM_KEY})


async def add_scripted(client: httpx.AsyncClient, ws: Workspace, upstream: ScriptedMcp, name: str) -> httpx.Response:
    return await post(client, ws, ADD, {"name": name, "url": upstream.url, "transport": "streamable_http"})


def refused_naming(response: httpx.Response, *parts: str) -> None:
    assert response.status_code == 502 and response.json()["error"] == "upstream_error", response.text[:400]
    message = response.json()["message"]
    assert "tool list is past what Prism reads" in message, message
    for part in parts:
        assert part in message, message


async def stored_operations(db: Database, name: str) -> list[dict[str, Any]] | None:
    async with db.read() as session:
        found: list[dict[str, Any]] | None = (await session.execute(
            select(IntegrationApp.operations).where(IntegrationApp.name == name))).scalar_one_or_none()
    return found


async def test_a_tool_past_the_limits_refuses_the_whole_list_naming_the_tool_and_the_limit(
        client: httpx.AsyncClient, factory: Factory, db: Database, fastmcp: RunningMcp) -> None:
    """As an OpenAPI import whose schema nests too deep is refused whole: an upstream's list with one tool past a
    limit is not stored at all, and the refusal names the tool and the limit; within the limits it is stored,
    a long description cut as an imported operation's."""
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    for schema, limit in ((nested(MAX_SCHEMA_DEPTH + 2), f"inputSchema nests deeper than {MAX_SCHEMA_DEPTH} levels"),
                          (wide(MAX_TOOL_PART_BYTES + 20_000), f"inputSchema is larger than {MAX_TOOL_PART_BYTES:,}")):
        serve(fastmcp, "fill_form", parameters=schema)
        refused_naming(await add_fastmcp(client, ws, fastmcp, name), "'fill_form'", limit)
        assert await stored_operations(db, name) is None
    serve(fastmcp, "fill_form", parameters=nested(MAX_SCHEMA_DEPTH - 2))
    serve(fastmcp, "report", parameters=wide(MAX_TOOL_PART_BYTES - 20_000), output_schema=nested(MAX_SCHEMA_DEPTH + 2))
    refused_naming(await add_fastmcp(client, ws, fastmcp, name), "'report'", "outputSchema nests deeper")

    serve(fastmcp, "report", parameters=wide(MAX_TOOL_PART_BYTES - 20_000), description="Report. " * 20_000)
    assert (await add_fastmcp(client, ws, fastmcp, name)).status_code == 200
    operations = {o["tool_name"]: o for o in await stored_operations(db, name) or []}
    assert len(operations["report"]["description"]) == DESCRIPTION_CHARS
    answered = await post(client, ws, f"integration_call/{name}/tool/fillForm", {})
    assert answered.status_code == 200, answered.text[:300]


async def test_an_answer_to_tools_list_too_large_to_hold_is_read_no_further(
        client: httpx.AsyncClient, factory: Factory, fastmcp: RunningMcp, scripted: ScriptedMcp) -> None:
    """One answer of the list is bounded before it is read: past 1 MB for an event of an event stream (the MCP
    client's limit, which Prism sets), past 2 MB for one JSON document (Prism's transport)."""
    ws = await factory.workspace(roles=("owner",))
    serve(fastmcp, "fill_form", description="x" * 1_500_000)
    started = asyncio.get_running_loop().time()
    refused = await add_fastmcp(client, ws, fastmcp, "mcp_" + uuid.uuid4().hex[:8])
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert "exceeded the 1048576 byte limit" in refused.json()["message"]
    scripted.tools = [{"name": "fill_form", "description": "x" * 3_000_000, "inputSchema": {"type": "object"}}]
    refused = await add_scripted(client, ws, scripted, "mcp_" + uuid.uuid4().hex[:8])
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert "larger than 2,000,000 bytes" in refused.json()["message"]
    assert asyncio.get_running_loop().time() - started < 10  # the default time limit is 30 s


async def test_a_tool_list_past_its_size_in_bytes_or_with_a_name_too_long_is_refused(
        client: httpx.AsyncClient, factory: Factory, db: Database, scripted: ScriptedMcp) -> None:
    """Pages that each fit in an answer add up to no more than the list's limit: reading stops at the page that
    goes past it. A tool's name is what a call sends back, so one longer than MCP allows is not cut but refused."""
    ws = await factory.workspace(roles=("owner",))
    per_page = 10
    page_tools = [wide(MAX_TOOL_PART_BYTES - 50_000) for _ in range(per_page)]

    def endless(cursor: str | None, key: str) -> dict[str, Any]:
        scripted.pages_listed += 1
        page = int(cursor or 0)
        return {"tools": [{"name": f"t{page}_{i}", "inputSchema": schema} for i, schema in enumerate(page_tools)],
                "nextCursor": str(page + 1)}

    scripted._tools_page = endless  # type: ignore[method-assign]
    name = "mcp_" + uuid.uuid4().hex[:8]
    refused_naming(await add_scripted(client, ws, scripted, name), f"larger than {MAX_TOOL_LIST_BYTES:,} bytes")
    page_bytes = len(orjson.dumps(page_tools))
    assert scripted.pages_listed <= MAX_TOOL_LIST_BYTES // page_bytes + 1
    assert await stored_operations(db, name) is None

    del scripted._tools_page  # the scripted list again
    scripted.tools = [{"name": "n" * 129, "inputSchema": {"type": "object"}},
                      {"name": "fine", "inputSchema": {"type": "object"}}]
    refused_naming(await add_scripted(client, ws, scripted, name), "'nnnn", "name is longer than 128 characters")
    scripted.tools = [{"name": "big_number", "inputSchema": {"type": "object", "properties": {
        "n": {"type": "integer", "maximum": 2 ** 70}}}}]
    refused_naming(await add_scripted(client, ws, scripted, name), "'big_number'", "integer beyond 64 bits")
    assert await stored_operations(db, name) is None


async def test_a_changed_list_past_the_limits_is_not_stored_and_the_integration_says_why(
        client: httpx.AsyncClient, factory: Factory, db: Database, scripted: ScriptedMcp) -> None:
    """A list announced during a call and past a limit: the call answers, the stored list keeps serving, and the
    owner sees why (status `stale`, `last_error` naming the tool and the limit); another organization sees
    nothing of the integration."""
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = [{"name": "install_more", "inputSchema": {"type": "object"}}]
    scripted.announcing = {"install_more"}
    assert (await add_scripted(client, ws, scripted, name)).status_code == 200
    scripted.tools = [*scripted.tools, {"name": "deep_form", "inputSchema": nested(MAX_SCHEMA_DEPTH + 2)}]
    installed = await post(client, ws, f"integration_call/{name}/tool/installMore", {})
    assert installed.status_code == 200, installed.text[:300]
    stale = await ok(client, ws, READ, {"name": name})
    assert (stale["status"], stale["revision"], stale["handlers"]) == ("stale", 1, 1)
    assert "'deep_form'" in stale["last_error"] and "nests deeper than 100 levels" in stale["last_error"]
    assert [o["tool_name"] for o in await stored_operations(db, name) or []] == ["install_more"]
    unseen = await post(client, other, READ, {"name": name})
    assert unseen.status_code == 404, unseen.text[:300]


class GzipBombMcp(OnLoopback):
    """An MCP server whose every answer is gzip, asked for or not: a valid JSON-RPC answer of `inflated` bytes in
    a few kilobytes on the wire. It keeps the Accept-Encoding of each request it got."""

    def __init__(self, tls: TlsFiles, inflated: int) -> None:
        self.inflated = inflated
        self.accepted: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.uvicorn = uvicorn.Server(uvicorn.Config(self._app, ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key),
                                                     interface="asgi3", log_level="error", lifespan="off",
                                                     timeout_graceful_shutdown=1))

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = b""
        while True:
            message = await receive()
            request += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.accepted.append(dict(scope["headers"]).get(b"accept-encoding", b""))
        asked = orjson.loads(request)
        result = {"protocolVersion": asked.get("params", {}).get("protocolVersion", "2025-06-18"),
                  "serverInfo": {"name": "bomb", "version": "1"}, "capabilities": {"tools": {}},
                  "instructions": "x" * self.inflated}
        body = gzip.compress(orjson.dumps({"jsonrpc": "2.0", "id": asked.get("id"), "result": result}))
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-encoding", b"gzip"),
            (b"mcp-session-id", b"bomb")]})
        await send({"type": "http.response.body", "body": body})


async def test_a_compressed_answer_is_refused_before_it_is_inflated(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    """The answer's limit counts the bytes the MCP client reads: an upstream that sends 20 MB of JSON as 20 kB of
    gzip (unasked: Prism asks for identity) is refused as an answer it cannot read, nothing of it inflated."""
    upstream = await GzipBombMcp(tls, inflated=20_000_000).start()
    try:
        ws = await factory.workspace(roles=("owner",))
        refused = await post(client, ws, ADD, {"name": "mcp_" + uuid.uuid4().hex[:8], "url": upstream.url,
                                               "transport": "streamable_http"})
    finally:
        await upstream.stop()
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:400]
    assert "compressed (Content-Encoding: gzip)" in refused.json()["message"], refused.text[:400]
    assert upstream.accepted and set(upstream.accepted) == {b"identity"}
