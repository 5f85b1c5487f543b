"""The official SDKs at the handshake revisions older clients speak, 2025-06-18 and 2025-03-26, against a real
`prism serve`: the `mcp` Python SDK and the TypeScript client.

`Client(mode="legacy")` always offers the SDK's newest handshake revision (2025-11-25), which Prism accepts, so it
never lands on an older one. An older client is reproduced with the SDK's public session API instead: the
`initialize` request is sent with the revision asked for, and `ClientSession.adopt` installs the answer, after
which the SDK stamps that revision on every request (`MCP-Protocol-Version`) and validates every result against
that revision's schema."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from tests.factories import Factory
from tests.mcp_clients import HERE as CLIENT_SCRIPTS
from tests.mcp_clients import node, node_modules
from tests.processes import Server, ServerPool, clean_env
from tests.test_mcp_protocol import PATH

PART = {"app": "spare_parts", "entity": "spare_part"}


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pool = ServerPool(tmp_path_factory.mktemp("older-revisions"))
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_CREDENTIAL_CACHE_SECONDS="0")
    try:
        yield pool.start(env=env)
    finally:
        pool.stop_all()


@asynccontextmanager
async def session_at(url: str, key: str, revision: str) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            answer = await session.send_request(types.InitializeRequest(params=types.InitializeRequestParams(
                protocol_version=revision, capabilities=types.ClientCapabilities(),
                client_info=types.Implementation(name="prism-test", version="1.0.0"))), types.InitializeResult)
            session.adopt(answer)
            await session.send_notification(types.InitializedNotification())
            yield session, answer


def data_of(result: types.CallToolResult) -> dict[str, Any]:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    value: dict[str, Any] = json.loads(first.text)
    return value


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-03-26"])
async def test_the_sdk_at_an_older_revision_lists_and_calls_tools_in_that_revisions_shapes(
        server: Server, factory: Factory, revision: str) -> None:
    ws = await factory.workspace(roles=("member",))
    structured = revision == "2025-06-18"  # titles, output schemas and structured content came with 2025-06-18
    async with session_at(server.base_url + PATH, ws.keys["member"], revision) as (session, answer):
        assert answer.protocol_version == revision and session.protocol_version == revision
        assert answer.capabilities.tools is not None
        tools: list[types.Tool] = []
        cursor = None
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        crud = next(t for t in tools if t.name == "prism_entity_crud")
        assert crud.annotations is not None and crud.annotations.read_only_hint is False
        assert crud.annotations.destructive_hint is False  # a member deletes nothing: no destructive operation
        assert (crud.title is not None, crud.output_schema is not None) == (structured, structured)

        created = await session.call_tool("prism_entity_crud", {
            **PART, "operation": "create", "arguments": {"sku": f"OLD-{revision}", "name": "An older client"}})
        assert created.is_error is False
        part = data_of(created)["data"]
        assert (created.structured_content is not None) is structured
        listed = await session.call_tool("prism_entity_crud", {**PART, "operation": "list", "arguments": {}})
        assert [p["sku"] for p in data_of(listed)["data"]["items"]] == [f"OLD-{revision}"]
        refused = await session.call_tool("prism_entity_crud", {
            **PART, "operation": "delete", "arguments": {"id": part["id"]}})
        assert refused.is_error is True and data_of(refused)["error"] == "permission_denied"
        invalid = await session.call_tool("prism_entity_crud", {**PART, "operation": "create",
                                                                "arguments": {"sku": 7}})
        assert invalid.is_error is True and data_of(invalid)["error"] == "invalid_arguments"


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-03-26"])
async def test_the_typescript_client_told_to_support_an_older_revision_handshakes_and_works_at_it(
        server: Server, factory: Factory, revision: str) -> None:
    """@modelcontextprotocol/client 2.x's public `supportedProtocolVersions` option: the handshake offers the
    first 2025-era revision of the list, as a client that knows no newer one does."""
    ws = await factory.workspace(roles=("viewer",))
    package = node_modules() / "@modelcontextprotocol" / "client"
    command = [node(), str(CLIENT_SCRIPTS / "ts_client.mjs"), "client", str(package), server.base_url + PATH,
               ws.keys["viewer"], "legacy", revision]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=90, check=False,
                                   stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == revision
    structured = revision == "2025-06-18"
    for tool in out["tools"]:
        assert tool["annotations"]["readOnlyHint"] is True  # a viewer's tools only read
        assert ("title" in tool, "outputSchema" in tool) == (structured, structured), tool["name"]
    assert ("structuredContent" in out["listed"]) is structured
    assert json.loads(out["listed"]["content"][0]["text"])["data"]["items"] == []
    assert out["refused"]["isError"] is True
    assert json.loads(out["refused"]["content"][0]["text"])["error"] == "permission_denied"
