"""Upstream MCP servers federated as governed handlers: a real FastMCP server over HTTPS on loopback (both
transports), its tools listed with their schemas and annotations, calls forwarded with the official client,
the tool list followed when the upstream says it changed, an unreachable upstream answered 502/504 without
touching the rest of the catalog, and none of it visible to another organization."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.config import Settings
from prism.integrations import service
from prism.integrations.credentials import Credential
from prism.integrations.mcp_upstream import operations_of, read_tools
from prism.integrations.models import IntegrationCall
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, ok, post
from tests.integrations_mcp_upstream import (
    UPSTREAM_KEY,
    RunningMcp,
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    upstream_tls_fixture,
)
from tests.processes import cli_json, run_cli
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


@pytest.fixture(params=["http", "sse"])
async def upstream(request: pytest.FixtureRequest, tls: TlsFiles) -> AsyncIterator[RunningMcp]:
    running = await RunningMcp(tls, transport=request.param).start()
    yield running
    await running.stop()


READ = "config_manage/integrations/integration/read"


def credential() -> dict[str, Any]:
    return {"auth_kind": "api_key", "header": "X-Upstream-Key", "secret": UPSTREAM_KEY}


async def added(client: httpx.AsyncClient, ws: Workspace, upstream: RunningMcp, name: str) -> dict[str, Any]:
    report: dict[str, Any] = await ok(client, ws, "config_manage/integrations/integration/addMcp", {
        "name": name, "url": upstream.url, "transport": "sse" if upstream.transport == "sse" else "streamable_http",
        **credential()})
    return report


async def tool(client: httpx.AsyncClient, ws: Workspace, name: str, operation: str, arguments: dict[str, Any],
               **extra: Any) -> httpx.Response:
    return await post(client, ws, f"integration_call/{name}/tool/{operation}", arguments, **extra)


async def test_upstream_tools_become_governed_handlers_and_calls_are_forwarded(
        client: httpx.AsyncClient, factory: Factory, upstream: RunningMcp) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    other = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    report = await added(client, ws, upstream, name)
    assert report["added"] == ["tool/bigAnswer", "tool/bookDelivery", "tool/cancelDelivery", "tool/getForecast",
                               "tool/installExtra", "tool/slowEcho"]

    described = {o["operation"]: o for o in (await ok(client, ws, "report_query/core/registry/introspect", {
        "dimension": "operations", "mega_tool": "integration_call", "app": name}))["operations"]}
    assert described["getForecast"]["read_only"] is True and described["getForecast"]["scope"] == "read"
    assert described["bookDelivery"]["destructive"] is False and described["cancelDelivery"]["destructive"] is True
    schema = await ok(client, ws, "report_query/core/registry/introspect", {
        "dimension": "schema", "mega_tool": "integration_call", "app": name, "entity": "tool",
        "operation": "getForecast"})
    assert schema["parameters"]["required"] == ["city"]

    forecast = await tool(client, ws, name, "getForecast", {"city": "Oslo", "days": 2})
    assert forecast.status_code == 200, forecast.text
    assert forecast.json()["data"]["structuredContent"]["days"][1] == {"day": 2, "celsius": 21}
    if upstream.transport == "http":  # later calls reuse the session: one HTTP request each, no handshake
        before = upstream.gate.requests
        for city in ("Rome", "Lima", "Pune"):
            assert (await tool(client, ws, name, "getForecast", {"city": city})).status_code == 200
        assert upstream.gate.requests - before == 3
    bad = await tool(client, ws, name, "getForecast", {"days": 2})
    assert bad.status_code == 400 and bad.json()["details"]["errors"][0]["field"] == "city"
    failed = await tool(client, ws, name, "bookDelivery", {"site": "Plant 1", "quantity": 500})
    assert failed.status_code == 502 and "no truck" in failed.json()["details"]["upstream_body"]
    booked = await tool(client, ws, name, "bookDelivery", {"site": "Plant 1", "quantity": 5}, label="member")
    assert booked.status_code == 200 and "booked 5" in booked.text
    by_member = await tool(client, ws, name, "cancelDelivery", {"delivery_id": "d1"}, label="member")
    assert by_member.status_code == 403 and f"{name}.delete_tool" in by_member.json()["message"]
    assert [c for c in upstream.server.calls if c != "get_forecast"] == [  # type: ignore[attr-defined]
        "book_delivery", "book_delivery"]

    hidden = await tool(client, other, name, "getForecast", {"city": "Oslo"})
    assert hidden.status_code == 404 and hidden.json()["error"] == "operation_not_found"


async def test_a_persona_denies_upstream_tools_like_any_handler(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    running = await RunningMcp(tls).start()
    try:
        ws = await factory.workspace(roles=("owner",))
        name = "mcp_" + uuid.uuid4().hex[:8]
        await added(client, ws, running, name)
        await governed_key(factory, client, ws, "agent", persona={
            "name": "careful", "default": "allow", "deny": [f"integration_call/{name}/tool/cancel*"]})
        blocked = await tool(client, ws, name, "cancelDelivery", {"delivery_id": "d1"}, label="agent")
        assert blocked.status_code == 403 and blocked.json()["error"] == "blocked"
        assert (await tool(client, ws, name, "getForecast", {"city": "Rome"}, label="agent")).status_code == 200
        assert running.server.calls == ["get_forecast"]  # type: ignore[attr-defined]
    finally:
        await running.stop()


async def test_oauth2_client_credentials_reach_an_upstream_mcp_server(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    running = await RunningMcp(tls).start()
    running.gate.oauth_client = ("prism-client", "client-s3cret")
    token_url = f"https://127.0.0.1:{running.port}/oauth/token"
    try:
        ws = await factory.workspace(roles=("owner",))
        name = "mcp_" + uuid.uuid4().hex[:8]
        report = await ok(client, ws, "config_manage/integrations/integration/addMcp", {
            "name": name, "url": running.url, "transport": "streamable_http", "auth_kind": "oauth2_client_credentials",
            "client_id": "prism-client", "token_url": token_url, "secret": "client-s3cret"})
        assert "tool/getForecast" in report["added"]  # the tool list was read with a token
        for city in ("Oslo", "Rome"):
            forecast = await tool(client, ws, name, "getForecast", {"city": city})
            assert forecast.status_code == 200, forecast.text
            assert forecast.json()["data"]["structuredContent"]["city"] == city
        assert running.gate.tokens_issued == 2  # one to read the tools, one for the kept-open session

        await ok(client, ws, "config_manage/integrations/connection/set", {
            "name": name, "base_url": running.url, "auth_kind": "oauth2_client_credentials",
            "client_id": "prism-client", "token_url": token_url, "secret": "wrong-s3cret"})
        refused = await tool(client, ws, name, "getForecast", {"city": "Lima"})
        assert refused.status_code == 502 and refused.json()["error"] == "upstream_unreachable"
        assert "token endpoint refused" in refused.json()["message"] and "wrong-s3cret" not in refused.text
        assert running.server.calls == ["get_forecast", "get_forecast"]  # type: ignore[attr-defined]
    finally:
        await running.stop()


async def test_the_tool_list_follows_the_upstream_and_an_unreachable_upstream_blocks_nothing_else(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    running = await RunningMcp(tls).start()
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    try:
        await added(client, ws, running, name)
        installed = await tool(client, ws, name, "installExtra", {})
        assert installed.status_code == 200, installed.text
        for _ in range(100):  # every process rebuilds within PRISM_INTEGRATIONS_REFRESH_SECONDS
            tracked = await tool(client, ws, name, "trackParcel", {"parcel": "P-9"})
            if tracked.status_code != 404:
                break
            await asyncio.sleep(0.1)
        assert tracked.status_code == 200 and "in transit" in tracked.text

        slow = await ok(client, ws, "config_manage/integrations/connection/set", {
            "name": name, "base_url": running.url, "timeout_seconds": 1, **credential()})
        assert slow["timeout_seconds"] == 1
        late = await tool(client, ws, name, "slowEcho", {"text": "hi", "seconds": 3})
        assert late.status_code == 504 and late.json()["error"] == "upstream_timeout"

        # A credential the upstream refuses (HTTP 401) is its answer, as an OpenAPI upstream's 401 is.
        await ok(client, ws, "config_manage/integrations/connection/set", {
            "name": name, "base_url": running.url, **credential(), "secret": "not-the-key"})
        refused = await tool(client, ws, name, "getForecast", {"city": "Oslo"})
        assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
        assert "not-the-key" not in refused.text
    finally:
        await running.stop()
    down = await tool(client, ws, name, "getForecast", {"city": "Oslo"})
    assert down.status_code == 502 and down.json()["error"] == "upstream_unreachable"
    # The rest of the catalog answers as before, and lists the integration's handlers from what was stored.
    assert (await ok(client, ws, "entity_crud/spare_parts/spare_part/list", {}))["total"] == 0
    tools = await client.get("/api/v1/dev/tools/", headers=ws.headers("owner"))
    assert tools.status_code == 200 and name in tools.text


async def test_the_cli_adds_and_refreshes_an_upstream_for_the_deployment(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, tls: TlsFiles) -> None:
    running = await RunningMcp(tls).start()
    name = "mcp_" + uuid.uuid4().hex[:8]
    outbound = {"PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "PRISM_WEBHOOK_CA_BUNDLE": settings.webhook_ca_bundle
                or "", "PRISM_CONNECTION_SECRET": UPSTREAM_KEY}
    try:
        added = await asyncio.to_thread(cli_json, "integration", "add-mcp", running.url, "--app", name, "--auth",
                                        "api_key", "--header", "X-Upstream-Key", database_url=settings.database_url,
                                        **outbound)
        assert added["kind"] == "mcp" and added["handlers"] == 6 and added["created"] is True
        wrong = await asyncio.to_thread(run_cli, "integration", "refresh", name, "--json",
                                        database_url=settings.database_url, **{**outbound,
                                                                               "PRISM_CONNECTION_SECRET": "nope"})
        assert wrong.returncode == 1 and wrong.error["error"] == "upstream_error"  # it answered: 401
        assert "nope" not in wrong.stderr
        same = await asyncio.to_thread(cli_json, "integration", "refresh", name, "--auth", "api_key", "--header",
                                       "X-Upstream-Key", database_url=settings.database_url, **outbound)
        assert (same["created"], same["added"], same["removed"], same["unchanged"]) == (False, [], [], 6)
        ws = await factory.workspace(roles=("owner",))
        await ok(client, ws, "config_manage/integrations/connection/set",
                 {"name": name, "base_url": running.url, **credential()})
        assert (await tool(client, ws, name, "getForecast", {"city": "Kyiv"})).status_code == 200
    finally:
        await running.stop()
        await asyncio.to_thread(cli_json, "integration", "remove", name, database_url=settings.database_url)


@pytest.fixture(params=["json", "http", "sse"])
async def any_upstream(request: pytest.FixtureRequest, tls: TlsFiles) -> AsyncIterator[RunningMcp]:
    running = await RunningMcp(tls, transport="sse" if request.param == "sse" else "http",
                               json_response=request.param == "json").start()
    running.kind = request.param  # type: ignore[attr-defined]
    yield running
    await running.stop()


# What stops an answer too large to hold: Prism's transport for one JSON document, the MCP client for an event of
# an event stream (1 MB), and for the legacy transport's stream the client again (which closes the session).
TOO_LARGE = {"json": "larger than 2,000,000 bytes", "http": "exceeded the 1048576 byte limit",
             "sse": "Connection closed"}


async def test_an_answer_too_large_to_hold_is_refused_without_waiting_for_the_time_limit(
        client: httpx.AsyncClient, factory: Factory, any_upstream: RunningMcp) -> None:
    """An upstream must not be able to fill Prism's memory: an answer past 2 MB (past 1 MB per event of an event
    stream) is read no further, and the call is a 502 at once; the upstream goes on serving calls."""
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    await added(client, ws, any_upstream, name)
    fits = await tool(client, ws, name, "bigAnswer", {"size": 400_000})
    assert fits.status_code == 200, fits.text[:300]
    assert len(fits.json()["data"]["content"][0]["text"]) == 400_000
    started = asyncio.get_running_loop().time()
    refused = await tool(client, ws, name, "bigAnswer", {"size": 3_000_000})
    assert asyncio.get_running_loop().time() - started < 10  # the connection's time limit is 30 s
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert TOO_LARGE[any_upstream.kind] in refused.json()["message"]  # type: ignore[attr-defined]
    after = await tool(client, ws, name, "getForecast", {"city": "Oslo"})
    assert after.status_code == 200, after.text


async def added_scripted(client: httpx.AsyncClient, ws: Workspace, upstream: ScriptedMcp, name: str) -> httpx.Response:
    return await post(client, ws, "config_manage/integrations/integration/addMcp",
                      {"name": name, "url": upstream.url, "transport": "streamable_http"})


def _described(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "inputSchema": {"type": "object", **schema}}


# Schemas an upstream may send: invalid ones (an unknown type, a reference to nothing, a pattern that does not
# compile, properties as a list, a minimum that is a string) and valid but unusual ones (boolean sub-schemas).
ODD_SCHEMAS = {
    "bad_type": _described("Weigh a giraffe by type.", {"properties": {"a": {"type": "bogus"}}}),
    "dangling_ref": _described("Weigh a giraffe by reference.", {"properties": {"a": {"$ref": "#/nowhere"}}}),
    "bad_pattern": _described("Weigh a giraffe by pattern.",
                              {"properties": {"a": {"type": "string", "pattern": "(("}}}),
    "listed_properties": _described("Weigh a giraffe by list.", {
        "properties": {"box": {"type": "object", "properties": ["a", "b"], "required": ["a"]}}, "required": ["box"]}),
    "string_minimum": _described("Weigh a giraffe by minimum.", {
        "properties": {"n": {"type": "integer", "exclusiveMinimum": "5"}}, "required": ["n"]}),
    "any_true": _described("Weigh a giraffe, any meta.", {
        "properties": {"n": {"anyOf": [True]}, "meta": True, "never": False,
                       "tags": {"type": "array", "items": True, "minItems": 1}}, "required": ["n", "meta", "tags"]}),
    "weigh_zebra": _described("Weigh a zebra.", {
        "properties": {"kg": {"type": "integer", "minimum": 1}}, "required": ["kg"]}),
}


async def test_tools_with_invalid_or_unusual_schemas_are_called_and_described_and_break_nothing_else(
        client: httpx.AsyncClient, factory: Factory, scripted: ScriptedMcp) -> None:
    """An invalid input schema is checked for its shape only (the call goes through); boolean sub-schemas are
    valid and honoured; the descriptor, capability search, introspection and the catalog all answer."""
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    scripted.tools = [{"name": name, **tool} for name, tool in ODD_SCHEMAS.items()]
    name = "mcp_" + uuid.uuid4().hex[:8]
    assert (await added_scripted(client, ws, scripted, name)).status_code == 200
    for operation, arguments in (("badType", {"a": "x"}), ("danglingRef", {"a": "x"}), ("badPattern", {"a": "x"}),
                                 ("listedProperties", {"box": {"a": 1}}), ("stringMinimum", {"n": 7}),
                                 ("anyTrue", {"n": 1, "meta": {"k": [1]}, "tags": ["x"]})):
        answered = await tool(client, ws, name, operation, arguments)
        assert answered.status_code == 200, (operation, answered.text)
    assert len(scripted.calls) == 6
    refused = await tool(client, ws, name, "anyTrue", {"n": 1, "meta": 2, "tags": ["x"], "never": 0})
    assert refused.status_code == 400 and "does not allow 0" in refused.json()["details"]["errors"][0]["message"]
    assert (await tool(client, ws, name, "weighZebra", {"kg": 0})).status_code == 400
    assert (await tool(client, ws, name, "weighZebra", {"kg": 3})).status_code == 200

    for owner in (ws, other):
        descriptor = await client.get("/.well-known/openapi.json", headers=owner.headers("owner"))
        assert descriptor.status_code == 200, descriptor.text[:300]
        assert (f"/prism/integration_call/{name}/tool/anyTrue" in descriptor.json()["paths"]) is (owner is ws)
    found = await client.get("/api/v1/dev/introspect/", params={
        "dimension": "capability_search", "query": "weigh a giraffe", "limit": 10}, headers=ws.headers("owner"))
    assert found.status_code == 200, found.text[:300]
    assert {r["parts"]["operation"] for r in found.json()["results"]} >= {"anyTrue", "listedProperties"}
    searched = await post(client, ws, "report_query/core/registry/search", {"query": "weigh a giraffe", "limit": 10})
    assert searched.status_code == 200, searched.text[:300]
    tools = await client.get("/api/v1/dev/tools/", headers=ws.headers("owner"))
    assert tools.status_code == 200
    for operation in ODD_SCHEMAS:
        schema = await post(client, ws, "report_query/core/registry/introspect", {
            "dimension": "schema", "mega_tool": "integration_call", "app": name, "entity": "tool",
            "operation": "".join(w.capitalize() if i else w for i, w in enumerate(operation.split("_")))})
        assert schema.status_code == 200, schema.text[:300]


async def test_an_upstream_pattern_that_backtracks_cannot_hold_the_process(
        client: httpx.AsyncClient, factory: Factory, scripted: ScriptedMcp) -> None:
    """An upstream lists the schema it likes: a pattern that Python's `re` would take hours over for a 40-letter
    argument is refused in well under a second, nothing is sent upstream, and the process goes on serving."""
    ws = await factory.workspace(roles=("owner",))
    scripted.tools = [{"name": "find_sku", **_described("Find a part by SKU.", {
        "properties": {"sku": {"type": "string", "pattern": "^(a+)+$"},
                       "code": {"type": "string", "pattern": r"^(a|a)*\1$"}}})}]
    name = "mcp_" + uuid.uuid4().hex[:8]
    assert (await added_scripted(client, ws, scripted, name)).status_code == 200
    for arguments, message in (({"sku": "a" * 40 + "!"}, "does not match"), ({"code": "a" * 40 + "!"}, "backtrack")):
        started = time.perf_counter()
        refused = await tool(client, ws, name, "findSku", arguments)
        assert time.perf_counter() - started < 1.0
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text[:300]
        assert message in refused.json()["details"]["errors"][0]["message"].lower()
    assert (await tool(client, ws, name, "findSku", {"sku": "aaaa"})).status_code == 200
    assert len(scripted.calls) == 1


async def test_an_endless_tool_list_is_read_no_further_than_the_limit(
        client: httpx.AsyncClient, factory: Factory, scripted: ScriptedMcp) -> None:
    ws = await factory.workspace(roles=("owner",))
    scripted.endless_pages = 200
    started = asyncio.get_running_loop().time()
    refused = await added_scripted(client, ws, scripted, "mcp_" + uuid.uuid4().hex[:8])
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert "more than 1,000 tools" in refused.json()["message"]
    assert asyncio.get_running_loop().time() - started < 10  # the default time limit is 30 s
    assert scripted.pages_listed <= 1000 // 200 + 1

    scripted.endless_pages = 0
    scripted.pages_listed = 0
    scripted.tools = []
    scripted._tools_page = lambda cursor, key: {"tools": [], "nextCursor": "again"}  # type: ignore[method-assign]
    empty = await added_scripted(client, ws, scripted, "mcp_" + uuid.uuid4().hex[:8])
    assert empty.status_code == 502 and "pages" in empty.json()["message"], empty.text[:300]
    assert asyncio.get_running_loop().time() - started < 20


async def test_a_tool_list_changed_to_an_endless_one_is_not_read_and_the_call_still_answers(
        client: httpx.AsyncClient, factory: Factory, db: Database, scripted: ScriptedMcp,
        caplog: pytest.LogCaptureFixture) -> None:
    """The call itself went through (it may have changed something upstream): it answers; the new list is read
    no further than the limit, not stored, and the call's record, the integration's status and the log say why;
    the previous list serves until the upstream lists one within the limits again."""
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = [{"name": "install_more", "inputSchema": {"type": "object"}}]
    scripted.announcing = {"install_more"}
    assert (await added_scripted(client, ws, scripted, name)).status_code == 200
    scripted.endless_pages = 200
    installed = await tool(client, ws, name, "installMore", {})
    assert installed.status_code == 200, installed.text[:300]
    # The add's one page, the MCP client's own read of the first page before the call, then six pages of 200.
    assert scripted.pages_listed <= 1 + 1 + 1000 // 200 + 1
    async with db.read() as session:
        record = (await session.execute(select(IntegrationCall.outcome, IntegrationCall.error).where(
            IntegrationCall.organization_id == ws.org.id))).one()
    assert record.outcome == "ok" and "more than 1,000 tools" in record.error
    stale = await ok(client, ws, READ, {"name": name})
    assert (stale["status"], stale["revision"], stale["handlers"]) == ("stale", 1, 1)
    assert "more than 1,000 tools" in stale["last_error"] and "revision 1 still serves" in stale["last_error"]
    assert stale["last_error_at"] is not None
    assert any(name in r.getMessage() and "more than 1,000 tools" in r.getMessage()
               for r in caplog.records if r.name == "prism.integrations" and r.levelname == "WARNING")
    scripted.endless_pages = 0
    assert (await tool(client, ws, name, "installMore", {})).status_code == 200  # the list was not replaced
    caught_up = await ok(client, ws, READ, {"name": name})  # that call announced a list within the limits
    assert (caught_up["status"], caught_up["revision"]) == ("ok", 1)
    assert caught_up["last_error"] == stale["last_error"]  # the last error stays readable, with its time


async def added_for_the_deployment(db: Database, settings: Settings, upstream: ScriptedMcp, name: str,
                                   key: str) -> dict[str, Any]:
    """What `prism integration add-mcp` (and `refresh`) does, in this process: the tool list read with the
    operator's credential, stored for the deployment."""
    tools = await read_tools(settings, upstream.url, "streamable_http",
                             Credential("api_key", {"header": "X-Upstream-Key"}, key))
    async with db.write() as session:
        return await service.add_mcp(session, settings, name, upstream.url, operations_of(tools, "streamable_http"),
                                     owner_organization_id=None, installed=frozenset())


async def test_a_deployment_integrations_tool_list_is_never_read_with_an_organizations_credential(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings, scripted: ScriptedMcp,
        caplog: pytest.LogCaptureFixture) -> None:
    """An upstream may list different tools to different credentials. A list change announced through one
    organization's session of the deployment's integration replaces nothing every other organization sees: that
    list is read with the operator's credential only, and the integration says it is stale (to organizations and
    to the operator's CLI) until the operator refreshes it."""
    shared = [{"name": "announce", "inputSchema": {"type": "object"}},
              {"name": "weather", "inputSchema": {"type": "object"}}]
    scripted.tools_by_key = {"operator-key": shared, "key-b": shared,
                             "key-a": [*shared, {"name": "a_payroll", "inputSchema": {"type": "object"}}]}
    scripted.announcing = {"announce"}
    name = "mcp_" + uuid.uuid4().hex[:8]
    assert (await added_for_the_deployment(db, settings, scripted, name, "operator-key"))["handlers"] == 2
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    for ws, key in ((a, "key-a"), (b, "key-b")):
        await ok(client, ws, "config_manage/integrations/connection/set", {
            "name": name, "base_url": scripted.url, "auth_kind": "api_key", "header": "X-Upstream-Key",
            "secret": key})
    announced = await tool(client, a, name, "announce", {})
    assert announced.status_code == 200, announced.text[:300]

    seen_by_b = await ok(client, b, READ, {"name": name})
    assert (seen_by_b["revision"], seen_by_b["handlers"], seen_by_b["status"]) == (1, 2, "stale")
    assert f"prism integration refresh {name}" in seen_by_b["last_error"]
    assert a.org.id not in seen_by_b["last_error"]  # which organization's session announced it is the log's
    assert any(a.org.id in r.getMessage() for r in caplog.records if r.name == "prism.integrations")
    listed = await asyncio.to_thread(cli_json, "integration", "list", database_url=settings.database_url)
    assert [i["status"] for i in listed["integrations"] if i["name"] == name] == ["stale"]

    refreshed = await added_for_the_deployment(db, settings, scripted, name, "operator-key")
    assert (refreshed["revision"], refreshed["added"]) == (1, [])
    assert (await ok(client, b, READ, {"name": name}))["status"] == "ok"


async def test_an_answer_prism_cannot_pass_on_is_an_upstream_error_and_recorded_as_one(
        client: httpx.AsyncClient, factory: Factory, db: Database, scripted: ScriptedMcp) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = [{"name": "huge_number", "inputSchema": {"type": "object"}},
                      {"name": "fine", "inputSchema": {"type": "object"}}]
    scripted.answers["huge_number"] = {"content": [], "structuredContent": {"n": 10 ** 30}}
    assert (await added_scripted(client, ws, scripted, name)).status_code == 200
    refused = await tool(client, ws, name, "hugeNumber", {})
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert "cannot be passed on" in refused.json()["message"]
    assert (await tool(client, ws, name, "fine", {})).status_code == 200
    async with db.read() as session:
        outcomes = (await session.execute(select(IntegrationCall.outcome).where(
            IntegrationCall.organization_id == ws.org.id).order_by(IntegrationCall.created_at))).scalars().all()
    assert outcomes == ["upstream_error", "ok"]
