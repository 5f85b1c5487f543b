"""Real MCP clients against real `prism serve` processes over loopback: the official `mcp` SDK (streamable HTTP
in its default and legacy modes, and legacy SSE), raw HTTP for the cross-process session and the stream's
life cycle, and the MCP Inspector CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError

from prism.registry.registry import build_registry
from tests.factories import Factory
from tests.mcp_clients import HERE as CLIENT_SCRIPTS
from tests.mcp_clients import node, node_modules
from tests.oauth_support import consent, query_of
from tests.processes import Server, ServerPool, clean_env
from tests.test_mcp_protocol import JSON_AND_SSE, PATH, rpc

PAGE_SIZE = 2


@dataclass
class Pair:
    first: Server
    second: Server


@pytest.fixture(scope="module")
def servers(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    log_dir = tmp_path_factory.mktemp("mcp-servers")
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_MCP_TOOLS_PAGE_SIZE=str(PAGE_SIZE),
                    PRISM_MCP_SSE_KEEPALIVE_SECONDS="0.2", PRISM_CREDENTIAL_CACHE_SECONDS="0")
    pool = ServerPool(log_dir)
    try:
        # Same working directory: both processes read the deployment's master secret from the same file.
        yield Pair(pool.start(env=env), pool.start(env=env))
    finally:
        pool.stop_all()


@asynccontextmanager
async def sdk_client(url: str, key: str, transport: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"}
    if transport == "sse":
        async with Client(sse_client(url, headers=headers), mode="legacy") as client:
            yield client
        return
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=transport) as client:  # type: ignore[arg-type]
            yield client


async def every_tool(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return tools


def text_of(result: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(result.content[0].text)
    return value


# The SDK's modes and the revision each one settles on with Prism: `auto` probes server/discover and moves to
# the per-request revision, a pinned mode skips the probe, `legacy` uses the handshake; the SSE transport speaks
# its own revision, 2024-11-05, which has no titles, output schemas or structured content.
REVISION_OF_MODE = {"auto": "2026-07-28", "2026-07-28": "2026-07-28", "legacy": "2025-11-25", "sse": "2024-11-05"}


@pytest.mark.parametrize("transport", list(REVISION_OF_MODE))
async def test_the_sdk_client_lists_every_page_and_calls_a_read_a_write_and_a_refused_operation(
        servers: Pair, factory: Factory, transport: str) -> None:
    ws = await factory.workspace(roles=("member",))
    async with sdk_client(servers.first.base_url + PATH, ws.keys["member"], transport) as client:
        assert client.protocol_version == REVISION_OF_MODE[transport]
        first_page = await client.list_tools()
        assert len(first_page.tools) == PAGE_SIZE and first_page.next_cursor is not None
        tools = await every_tool(client)
        names = [t.name for t in tools]
        assert len(names) > PAGE_SIZE and {"prism_entity_crud", "prism_whoami"} <= set(names)
        structured = transport != "sse"
        assert all(bool(t.title and t.output_schema) is structured and t.annotations for t in tools)
        me = await client.call_tool("prism_whoami", {})
        assert text_of(me)["data"]["tenant"]["subdomain"] == ws.tenant.subdomain
        if structured:
            # A handler that declares its result model publishes it: the SDK validates the structured content.
            whoami = next(t for t in tools if t.name == "prism_whoami")
            assert whoami.output_schema is not None
            assert "tenant" in whoami.output_schema["properties"]["data"]["properties"]
            assert me.structured_content is not None
            assert me.structured_content["data"]["tenant"]["subdomain"] == ws.tenant.subdomain
        else:
            assert me.structured_content is None

        created = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "create",
            "arguments": {"sku": f"SDK-{transport}", "name": "From the SDK"}})
        assert created.is_error is False
        part = text_of(created)["data"]
        if structured:
            assert created.structured_content == text_of(created)  # validated by the SDK against outputSchema
        read = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "read", "arguments": {"id": part["id"]}})
        assert read.is_error is False and text_of(read)["data"]["sku"] == f"SDK-{transport}"
        refused = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "delete", "arguments": {"id": part["id"]}})
        assert refused.is_error is True and text_of(refused)["error"] == "permission_denied"
        invalid = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": {"sku": 7}})
        assert invalid.is_error is True and text_of(invalid)["error"] == "invalid_arguments"


@pytest.mark.parametrize("transport", ["auto", "legacy"])
async def test_refusals_point_the_model_at_the_prism_introspect_tool_which_answers_them(
        servers: Pair, factory: Factory, transport: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with sdk_client(servers.first.base_url + PATH, ws.keys["owner"], transport) as client:
        missing = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "frobnicate", "arguments": {}})
        assert missing.is_error is True and text_of(missing)["error"] == "operation_not_found"
        invalid = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": {"sku": 7}})
        assert text_of(invalid)["error"] == "invalid_arguments"
        for refused in (missing, invalid):
            message = text_of(refused)["message"]
            assert "prism_introspect" in message and "/api/" not in message, message
        # Following the pointer works: the schema the message names comes back.
        schema = await client.call_tool("prism_introspect", {
            "dimension": "schema", "operation": "entity_crud/spare_parts/spare_part/create"})
        assert schema.is_error is False and "sku" in text_of(schema)["data"]["parameters"]["properties"]
        with pytest.raises(MCPError, match="prism_introspect"):
            await client.call_tool("prism_no_such_tool", {})


@pytest.mark.parametrize("transport", ["auto", "legacy"])
async def test_the_split_surface_gives_every_tool_hints_that_hold_for_each_of_its_operations(
        servers: Pair, factory: Factory, transport: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with sdk_client(servers.first.base_url + PATH + "?tools=split", ws.keys["owner"], transport) as client:
        tools = {t.name: t for t in await every_tool(client)}
        assert "prism_entity_crud" not in tools and "prism_whoami" in tools
        checked = 0
        for handler in build_registry():
            if handler.people_only:  # a key never sees it (minting and revoking keys are a person's)
                continue
            c = handler.coordinate
            kind = "read" if handler.read_only else "destructive" if handler.destructive else "write"
            tool = tools[f"prism_{c.mega_tool}_{kind}"]
            properties = tool.input_schema["properties"]
            assert c.operation in properties["operation"]["enum"] and c.app in properties["app"]["enum"]
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is handler.read_only
            assert tool.annotations.destructive_hint is (handler.destructive and not handler.read_only)
            checked += 1
        assert checked > 189
        part = {"app": "spare_parts", "entity": "spare_part"}
        created = await client.call_tool("prism_entity_crud_write", {
            **part, "operation": "create", "arguments": {"sku": "SPLIT-1", "name": "Split"}})
        assert created.is_error is False
        ident = {"id": text_of(created)["data"]["id"]}
        # A delete slipped into a read-only tool (one a client may run without asking) is refused, not run.
        sneaked = await client.call_tool("prism_entity_crud_read", {**part, "operation": "delete", "arguments": ident})
        assert sneaked.is_error is True and text_of(sneaked)["error"] == "wrong_tool_variant"
        assert "prism_entity_crud_destructive" in text_of(sneaked)["message"]
        read = await client.call_tool("prism_entity_crud_read", {**part, "operation": "read", "arguments": ident})
        assert read.is_error is False and text_of(read)["data"]["sku"] == "SPLIT-1"
        deleted = await client.call_tool("prism_entity_crud_destructive", {
            **part, "operation": "delete", "arguments": ident})
        assert deleted.is_error is False
    async with sdk_client(servers.first.base_url + PATH, ws.keys["owner"], transport) as client:
        assert "prism_entity_crud" in {t.name for t in await every_tool(client)}  # the default stays the 13 doors
    auth = {"Authorization": f"Bearer {ws.keys['owner']}"}
    async with httpx.AsyncClient(timeout=30) as http:
        wrong = await http.post(servers.first.base_url + PATH + "?tools=tiny", json=rpc("ping"),
                                headers={**auth, **JSON_AND_SSE})
        assert wrong.status_code == 400 and wrong.json()["error"]["data"]["error"] == "invalid_tool_surface"
        # A legacy SSE stream's endpoint keeps the surface its GET chose.
        async with http.stream("GET", servers.first.base_url + PATH + "?tools=split",
                               headers={**auth, "Accept": "text/event-stream"}) as stream:
            first = await _next_event(stream.aiter_lines())
            assert first[0] == "event: endpoint" and first[1].endswith("&tools=split")


async def test_a_keys_own_tool_surface_is_used_without_a_url_parameter_and_touches_no_other_key(
        servers: Pair, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    split_key = await factory.add_key(ws, "split-agent", tool_surface="split")
    mega_key = await factory.add_key(ws, "mega-agent", tool_surface="mega")
    url = servers.first.base_url + PATH

    async def names(key: str, transport: str, query: str = "") -> set[str]:
        async with sdk_client(url + query, key, transport) as client:
            return {t.name for t in await every_tool(client)}

    for transport in ("auto", "legacy", "sse"):
        split = await names(split_key, transport)
        assert {"prism_entity_crud_read", "prism_entity_crud_write", "prism_entity_crud_destructive"} <= split
        assert "prism_entity_crud" not in split and "prism_whoami" in split
    # Another key of the same tenant (no option, or `mega`) sees the 13 doors; so does another tenant's key.
    for key in (ws.keys["owner"], mega_key, other.keys["owner"]):
        doors = await names(key, "auto")
        assert "prism_entity_crud" in doors and not any(n.endswith("_read") for n in doors)
    # The URL's ?tools= outranks the key's option, both ways.
    assert "prism_entity_crud" in await names(split_key, "auto", "?tools=mega")
    assert "prism_entity_crud_read" in await names(mega_key, "legacy", "?tools=split")
    async with sdk_client(url, split_key, "auto") as client:  # the split key's calls run on its surface
        created = await client.call_tool("prism_entity_crud_write", {
            "app": "spare_parts", "entity": "spare_part", "operation": "create",
            "arguments": {"sku": "KEY-SPLIT", "name": "From a split key"}})
        assert created.is_error is False
    async with sdk_client(url, other.keys["owner"], "auto") as client:  # and only in its own tenant
        listed = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}})
        assert text_of(listed)["data"]["items"] == []


@pytest.mark.parametrize("transport", ["auto", "legacy"])
async def test_a_document_result_links_to_a_resource_the_client_reads_and_another_tenant_cannot(
        servers: Pair, factory: Factory, transport: str) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    url = servers.first.base_url + PATH
    async with sdk_client(url, ws.keys["owner"], transport) as client:
        uploaded = await client.call_tool("prism_document_op", {
            "app": "documents", "entity": "document", "operation": "upload",
            "arguments": {"title": "Pump manual", "content": "Bleed the pump before starting it."}})
        assert uploaded.is_error is False
        links = [c for c in uploaded.content if c.type == "resource_link"]
        assert len(links) == 1 and links[0].name == "Pump manual"
        uri = str(links[0].uri)
        read = await client.read_resource(uri)
        assert [c.text for c in read.contents] == ["Bleed the pump before starting it."]  # type: ignore[union-attr]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["prism://documents/document/{id}"]
    async with sdk_client(url, other.keys["owner"], transport) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
        # 2026-07-28 makes a missing resource invalid params; the handshake revisions answer -32002.
        assert refused.value.error.code == (-32602 if transport == "auto" else -32002)


async def test_the_sdk_client_finds_a_handler_with_prism_search_and_calls_its_recipe_next(
        servers: Pair, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with sdk_client(servers.first.base_url + PATH, ws.keys["member"], "auto") as client:
        assert "prism_search" in {t.name for t in await every_tool(client)}
        created = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "create",
            "arguments": {"sku": "SDK-SEARCH", "name": "Found by search"}})
        part = text_of(created)["data"]
        found = await client.call_tool("prism_search", {"query": f"show me spare part {part['id']}", "limit": 3})
        assert found.is_error is False
        best = text_of(found)["data"]["results"][0]
        assert best["coordinate"] == "entity_crud/spare_parts/spare_part/read" and best["recipe"]["fill"] == []
        assert best["parameters"]["required"] == ["id"]
        read = await client.call_tool(best["recipe"]["tool"], best["recipe"]["http"]["body"])
        assert read.is_error is False and text_of(read)["data"]["sku"] == "SDK-SEARCH"


async def test_keys_of_two_tenants_see_their_own_tools_and_data_through_the_sdk(
        servers: Pair, factory: Factory) -> None:
    a = await factory.workspace(roles=("owner",))
    b = await factory.workspace(roles=("viewer",))
    listing = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
    async with sdk_client(servers.first.base_url + PATH, a.keys["owner"], "legacy") as client:
        await client.call_tool("prism_entity_crud", {**listing, "operation": "create",
                                                     "arguments": {"sku": "ONLY-A", "name": "A's part"}})
        a_tools = await every_tool(client)
        assert [p["sku"] for p in text_of(await client.call_tool("prism_entity_crud", listing))["data"]["items"]] == [
            "ONLY-A"]
    async with sdk_client(servers.first.base_url + PATH, b.keys["viewer"], "legacy") as client:
        b_tools = await every_tool(client)
        assert text_of(await client.call_tool("prism_entity_crud", listing))["data"]["items"] == []
    assert all(t.annotations and t.annotations.read_only_hint for t in b_tools)
    assert any(t.annotations and not t.annotations.read_only_hint for t in a_tools)


async def test_a_session_opened_on_one_process_is_accepted_by_another(servers: Pair, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    headers = {"Authorization": f"Bearer {ws.keys['owner']}", **JSON_AND_SSE}
    async with httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(servers.first.base_url + PATH, headers=headers, json=rpc("initialize", {}))
        session = opened.headers["mcp-session-id"]
        answer = await http.post(servers.second.base_url + PATH, headers={**headers, "Mcp-Session-Id": session},
                                 json=rpc("tools/call", {"name": "prism_whoami", "arguments": {}}))
        assert answer.status_code == 200
        assert json.loads(answer.json()["result"]["content"][0]["text"])["data"]["tenant"]["subdomain"] == (
            ws.tenant.subdomain)
        other = await factory.workspace(roles=("owner",))
        foreign = await http.post(servers.second.base_url + PATH, json=rpc("tools/list"), headers={
            "Authorization": f"Bearer {other.keys['owner']}", **JSON_AND_SSE, "Mcp-Session-Id": session})
        assert foreign.status_code == 404


async def test_a_key_on_another_tenants_host_is_401(servers: Pair, factory: Factory) -> None:
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(servers.first.base_url + PATH, json=rpc("initialize", {}), headers={
            "Authorization": f"Bearer {a.keys['owner']}", **JSON_AND_SSE, "Host": f"{b.host}:{servers.first.port}"})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith(
        f'Bearer realm="prism", resource_metadata="http://{b.host}:{servers.first.port}'
        '/.well-known/oauth-protected-resource/api/mcp/sse", error="invalid_token"')


async def _next_event(lines: AsyncIterator[str]) -> list[str]:
    event: list[str] = []
    async for line in lines:
        if line == "":
            if event:
                return event
            continue
        event.append(line)
    raise AssertionError("stream ended")


async def test_legacy_sse_announces_the_endpoint_keeps_alive_answers_and_closes_cleanly(
        servers: Pair, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    base = servers.first.base_url
    auth = {"Authorization": f"Bearer {ws.keys['owner']}"}
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("GET", base + PATH, headers={**auth, "Accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.aiter_lines()
            first = await _next_event(lines)
            assert first[0] == "event: endpoint" and first[1].startswith(f"data: {PATH}?session_id=")
            endpoint = base + first[1].removeprefix("data: ")
            assert await _next_event(lines) == [": keep-alive"]
            posted = await http.post(endpoint, headers={**auth, "Content-Type": "application/json"},
                                     json=rpc("ping", request_id=41))
            assert posted.status_code == 202
            answer = await _next_event(lines)
            while answer == [": keep-alive"]:
                answer = await _next_event(lines)
            assert answer == ["event: message", 'data: {"jsonrpc":"2.0","id":41,"result":{}}']
            intruder = await http.post(endpoint, json=rpc("ping"), headers={
                "Authorization": f"Bearer {ws.keys['member']}", "Content-Type": "application/json"})
            assert intruder.status_code == 404
        # The client left: the stream is gone, so its endpoint no longer takes messages.
        for _ in range(50):
            after = await http.post(endpoint, headers={**auth, "Content-Type": "application/json"}, json=rpc("ping"))
            if after.status_code == 404:
                break
            await asyncio.sleep(0.1)
        assert after.status_code == 404
    assert "Traceback" not in servers.first.stderr


class MemoryTokens:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def test_the_sdk_oauth_client_discovers_registers_authorizes_calls_and_refreshes(
        servers: Pair, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    base = servers.first.base_url
    asked: list[str] = []

    async def redirect(url: str) -> None:
        asked.append(url)

    async def consent_in_a_scripted_browser() -> AuthorizationCodeResult:
        params = {k: v[0] for k, v in parse_qs(urlsplit(asked[-1]).query).items()}
        async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
            answer = await consent(browser, params, email=ws.emails["owner"])
        assert answer.status_code == 303, answer.text
        back = query_of(answer.headers["location"])
        return AuthorizationCodeResult(code=back["code"], state=back.get("state"), iss=back.get("iss"))

    storage = MemoryTokens()
    provider = OAuthClientProvider(
        server_url=base + PATH, storage=storage, redirect_handler=redirect,
        callback_handler=consent_in_a_scripted_browser,
        client_metadata=OAuthClientMetadata(client_name="SDK test", redirect_uris=["http://127.0.0.1:9/callback"],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none",
                                            scope="mcp:read mcp:write mcp:execute"))
    async with asyncio.timeout(120), httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(base + PATH, http_client=http), mode="legacy") as client:
            assert asked, "the client never had to authorize"
            assert "prism_entity_crud" in {t.name for t in await every_tool(client)}
            me = text_of(await client.call_tool("prism_whoami", {}))
            assert me["data"]["tenant"]["subdomain"] == ws.tenant.subdomain
            first = storage.tokens
            assert first is not None and first.refresh_token
            provider.context.token_expiry_time = 1.0  # the access token is now past its lifetime
            again = await client.call_tool("prism_whoami", {})
            assert again.is_error is False
            assert storage.tokens is not None and storage.tokens.access_token != first.access_token
            # The user revokes the client's tokens; its next call is 401, the SDK signs in again (a new grant)
            # and repeats the call on the session it already has, which still belongs to this user and client.
            async with httpx.AsyncClient(base_url=base, timeout=30) as plain:
                for token in (storage.tokens.refresh_token, storage.tokens.access_token):
                    revoked = await plain.post("/api/mcp/oauth/revoke/", data={"token": token})
                    assert revoked.status_code == 200
            after = await client.call_tool("prism_whoami", {})
            assert after.is_error is False, after
            assert text_of(after)["data"]["tenant"]["subdomain"] == ws.tenant.subdomain
    assert len(asked) == 2


def inspector() -> list[str]:
    modules = node_modules()
    return [node(), str(modules / ".bin" / "mcp-inspector"), "--cli"]


def run_inspector(url: str, key: str, *args: str, era: str = "legacy") -> subprocess.CompletedProcess[str]:
    command = [*inspector(), url, "--transport", "http", "--protocol-era", era, "--header",
               f"Authorization: Bearer {key}", *args]
    env = {**os.environ, "HOME": str(node_modules().parent)}  # its catalog file lands in the scratch dir
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("era", ["legacy", "auto"])  # auto: server/discover, then 2026-07-28 without a session
async def test_the_inspector_cli_lists_and_calls_tools_and_exits_5_on_a_refused_call(
        servers: Pair, factory: Factory, era: str) -> None:
    ws = await factory.workspace(roles=("viewer",))
    url, key = servers.second.base_url + PATH, ws.keys["viewer"]
    listed = await asyncio.to_thread(run_inspector, url, key, "--method", "tools/list", era=era)
    assert listed.returncode == 0, listed.stderr
    assert "prism_entity_crud" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    called = await asyncio.to_thread(run_inspector, url, key, "--method", "tools/call", "--tool-name",
                                     "prism_entity_crud", "--tool-arg", "app=spare_parts", "entity=spare_part",
                                     "operation=list", era=era)
    assert called.returncode == 0, called.stderr
    assert json.loads(json.loads(called.stdout)["content"][0]["text"])["data"]["items"] == []
    refused = await asyncio.to_thread(run_inspector, url, key, "--method", "tools/call", "--tool-name",
                                      "prism_entity_crud", "--tool-arg", "app=spare_parts", "entity=spare_part",
                                      "operation=create", 'arguments={"sku": "X", "name": "Viewer"}', era=era)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "permission_denied" in refused.stdout
    searched = await asyncio.to_thread(run_inspector, url, key, "--method", "tools/call", "--tool-name",
                                       "prism_search", "--tool-arg", "query=which spare parts do we stock?", era=era)
    assert searched.returncode == 0, searched.stderr
    answer = json.loads(json.loads(searched.stdout)["content"][0]["text"])["data"]
    assert answer["results"][0]["coordinate"].startswith("entity_crud/spare_parts/spare_part/")


@pytest.mark.parametrize(("flavour", "mode", "revision"), [
    ("sdk", "legacy", "2025-11-25"), ("client", "legacy", "2025-11-25"), ("client", "auto", "2026-07-28")])
async def test_the_typescript_sdks_list_and_call_tools_at_the_revision_they_negotiate(
        servers: Pair, factory: Factory, flavour: str, mode: str, revision: str) -> None:
    ws = await factory.workspace(roles=("viewer",))
    package = node_modules() / "@modelcontextprotocol" / flavour
    command = [node(), str(CLIENT_SCRIPTS / "ts_client.mjs"), flavour, str(package), servers.first.base_url + PATH,
               ws.keys["viewer"], mode]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=90, check=False,
                                   stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == revision
    assert all(t["title"] and t["outputSchema"] and t["annotations"]["readOnlyHint"] for t in out["tools"])
    assert out["listed"]["structuredContent"]["data"]["items"] == []
    assert out["refused"]["isError"] is True
    assert json.loads(out["refused"]["content"][0]["text"])["error"] == "permission_denied"
