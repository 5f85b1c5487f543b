"""The MCP door per protocol revision: server/discover and session-less 2026-07-28 requests, the handshake
revisions 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05, and what each one allows on the wire."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from prism.errors import PrismError
from prism.mcp_server import resources
from tests.factories import Factory, Workspace
from tests.test_mcp_protocol import LIST_PARTS, PATH, call, headers_for, initialize, rpc

MODERN = "2026-07-28"
SERVED = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def envelope(params: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
    return {**(params or {}), "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                                        "io.modelcontextprotocol/clientCapabilities": {},
                                        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}


def modern_headers(ws: Workspace, method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    extra = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    if name is not None:
        extra["Mcp-Name"] = name
    return headers_for(ws, **extra)


async def modern(client: httpx.AsyncClient, ws: Workspace, method: str, params: dict[str, Any] | None = None,
                 name: str | None = None) -> httpx.Response:
    return await client.post(PATH, headers=modern_headers(ws, method, name), json=rpc(method, envelope(params)))


async def test_server_discover_names_every_revision_and_answers_without_a_session(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await modern(client, ws, "server/discover")
    assert answer.status_code == 200, answer.text
    assert "mcp-session-id" not in answer.headers
    result = answer.json()["result"]
    assert result["supportedVersions"] == SERVED
    assert result["resultType"] == "complete" and result["capabilities"]["tools"] == {"listChanged": False}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "prism"
    assert {"cacheScope", "ttlMs", "instructions"} <= set(result)


async def test_a_2026_07_28_client_lists_and_calls_tools_without_any_session(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    listed = await modern(client, ws, "tools/list")
    assert listed.status_code == 200
    result = listed.json()["result"]
    assert result["resultType"] == "complete" and result["cacheScope"] == "private"
    crud = next(t for t in result["tools"] if t["name"] == "prism_entity_crud")
    assert crud["title"] and crud["outputSchema"]["type"] == "object" and crud["_meta"]
    called = await modern(client, ws, "tools/call", {"name": "prism_entity_crud", "arguments": LIST_PARTS},
                          name="prism_entity_crud")
    assert called.status_code == 200
    body = called.json()["result"]
    assert body["isError"] is False and body["structuredContent"]["data"]["items"] == []
    created = await modern(client, ws, "tools/call", {"name": "prism_entity_crud", "arguments": {
        **LIST_PARTS, "operation": "create", "arguments": {"sku": "MODERN-1", "name": "No session"}}},
        name="prism_entity_crud")
    assert created.json()["result"]["isError"] is False
    other = await factory.workspace()  # without sessions, the credential alone still decides the tenant
    theirs = await modern(client, other, "tools/call", {"name": "prism_entity_crud", "arguments": LIST_PARTS},
                          name="prism_entity_crud")
    assert theirs.json()["result"]["structuredContent"]["data"]["items"] == []
    mine = await modern(client, ws, "tools/call", {"name": "prism_entity_crud", "arguments": LIST_PARTS},
                        name="prism_entity_crud")
    assert [p["sku"] for p in mine.json()["result"]["structuredContent"]["data"]["items"]] == ["MODERN-1"]


@pytest.mark.parametrize(("headers", "code"), [
    ({"Mcp-Method": "tools/list"}, -32020),                                        # the method header lies
    ({"Mcp-Name": "prism_whoami"}, -32020),                                          # the name header lies
    ({"Mcp-Name": b"=?base64?\xe9t\xe9?="}, -32020),                     # encoded, but not base64 (nor ASCII)
])
async def test_routing_headers_that_disagree_with_the_body_are_400(
        client: httpx.AsyncClient, factory: Factory, headers: dict[str, str | bytes], code: int) -> None:
    ws = await factory.workspace()
    sent: dict[str, str | bytes] = {**modern_headers(ws, "tools/call", "prism_entity_crud"), **headers}
    answer = await client.post(PATH, headers=sent, json=rpc("tools/call", envelope(
        {"name": "prism_entity_crud", "arguments": LIST_PARTS})))
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == code


async def test_a_2026_07_28_request_without_its_envelope_a_batch_or_an_unknown_revision_is_400(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    bare = await client.post(PATH, headers=modern_headers(ws, "tools/list"), json=rpc("tools/list", {}))
    assert bare.status_code == 400 and bare.json()["error"]["code"] == -32602
    batch = await client.post(PATH, headers=modern_headers(ws, "tools/list"),
                              json=[rpc("tools/list", envelope()), rpc("tools/list", envelope(), request_id=2)])
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600
    future = await client.post(PATH, headers=modern_headers(ws, "server/discover", version="2099-01-01"),
                               json=rpc("server/discover", envelope(version="2099-01-01")))
    assert future.status_code == 400
    assert future.json()["error"] == {"code": -32022, "message": "Unsupported protocol version",
                                      "data": {"supported": SERVED, "requested": "2099-01-01"}}
    mismatched = await client.post(PATH, headers=modern_headers(ws, "tools/list"),
                                   json=rpc("tools/list", envelope(version="2025-11-25")))
    assert mismatched.status_code == 400 and mismatched.json()["error"]["code"] == -32020
    unknown = await modern(client, ws, "prompts/list")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == -32601
    handshake = await modern(client, ws, "initialize", {"protocolVersion": MODERN, "capabilities": {}})
    assert handshake.status_code == 404
    notified = await client.post(PATH, headers=modern_headers(ws, "notifications/initialized"),
                                 json=rpc("notifications/initialized", envelope(), request_id=None))
    assert notified.status_code == 202 and notified.content == b""


async def test_a_2026_07_28_refusal_of_a_request_answers_its_id(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    no_envelope = await client.post(PATH, headers=modern_headers(ws, "server/discover"),
                                    json=rpc("server/discover", request_id=11))
    lying_header = await client.post(PATH, headers=modern_headers(ws, "tools/list"),
                                     json=rpc("ping", envelope(), request_id=12))
    future = await client.post(PATH, headers=modern_headers(ws, "server/discover", version="2099-01-01"),
                               json=rpc("server/discover", envelope(version="2099-01-01"), request_id=13))
    not_an_object = await client.post(PATH, headers=modern_headers(ws, "tools/list"), json={
        "jsonrpc": "2.0", "id": 14, "method": "tools/list", "params": [1]})
    answers = [no_envelope, lying_header, future, not_an_object]
    assert [a.status_code for a in answers] == [400] * 4
    assert [(a.json()["id"], a.json()["error"]["code"]) for a in answers] == [
        (11, -32602), (12, -32020), (13, -32022), (14, -32602)]


async def test_a_missing_resource_is_invalid_params_from_2026_07_28_and_resource_not_found_before(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """2026-07-28 server/resources "Error Handling": a resource that does not exist MUST be -32602 (400 on its
    wire); the earlier revisions keep -32002. Another tenant's document does not exist for the caller either."""
    ws, other = await factory.workspace(), await factory.workspace()
    uploaded = await client.post("/api/mcp/tools/prism_document_op/", headers=other.headers(), json={
        "app": "documents", "entity": "document", "operation": "upload",
        "arguments": {"title": "Theirs", "content": "Not for tenant a."}})
    theirs = f"prism://documents/document/{uploaded.json()['data']['id']}"
    headers = headers_for(ws)
    session = await initialize(client, headers, "2025-11-25")
    for uri in ("prism://nope", "prism://documents/document/missing", theirs):
        modern_answer = await client.post(PATH, headers=modern_headers(ws, "resources/read", uri),
                                          json=rpc("resources/read", envelope({"uri": uri}), request_id=31))
        assert modern_answer.status_code == 400, uri
        assert (modern_answer.json()["id"], modern_answer.json()["error"]["code"]) == (31, -32602), uri
        assert modern_answer.json()["error"]["data"]["uri"] == uri
        older = await call(client, headers, session, rpc("resources/read", {"uri": uri}, request_id=32))
        assert older.status_code == 200
        assert (older.json()["id"], older.json()["error"]["code"]) == (32, -32002), uri


async def test_a_2026_07_28_batch_of_one_request_is_refused_with_its_id(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """JSON-RPC 2.0 section 5: the id is null only when it could not be read."""
    ws = await factory.workspace()
    one = await client.post(PATH, headers=modern_headers(ws, "tools/list"),
                            json=[rpc("tools/list", envelope(), request_id=41)])
    two = await client.post(PATH, headers=modern_headers(ws, "tools/list"),
                            json=[rpc("tools/list", envelope(), request_id=42), rpc("ping", envelope(), request_id=43)])
    assert one.status_code == two.status_code == 400
    assert (one.json()["id"], one.json()["error"]["data"]["error"]) == (41, "batch_not_supported")
    assert two.json()["id"] is None  # two ids cannot share one answer


@pytest.mark.parametrize(("version", "batches"), [
    ("2025-11-25", False), ("2025-06-18", False), ("2025-03-26", True), ("2024-11-05", True)])
async def test_batches_are_answered_only_on_the_revisions_that_define_them(
        client: httpx.AsyncClient, factory: Factory, version: str, batches: bool) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, version)
    answer = await call(client, headers, session, [rpc("ping", request_id=1), rpc("ping", request_id=2)])
    if batches:
        assert answer.status_code == 200 and [a["id"] for a in answer.json()] == [1, 2]
    else:
        assert answer.status_code == 400 and answer.json()["error"]["data"]["error"] == "batch_not_supported"


@pytest.mark.parametrize(("version", "structured"), [
    ("2025-11-25", True), ("2025-06-18", True), ("2025-03-26", False), ("2024-11-05", False)])
async def test_titles_output_schemas_and_structured_content_follow_the_revision(
        client: httpx.AsyncClient, factory: Factory, version: str, structured: bool) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, version)
    tools = (await call(client, headers, session, rpc("tools/list"))).json()["result"]["tools"]
    crud = next(t for t in tools if t["name"] == "prism_entity_crud")
    assert crud["annotations"]["title"]  # annotations (with their title) exist from 2025-03-26 on
    assert ("title" in crud, "outputSchema" in crud, "_meta" in crud) == (structured,) * 3
    answer = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud",
                                                                    "arguments": LIST_PARTS}))
    result = answer.json()["result"]
    assert ("structuredContent" in result) is structured
    invalid = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud", "arguments": {
        "app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": {"sku": 7}}}))
    assert invalid.json()["result"]["isError"] is True  # invalid input is a tool error on every revision


async def test_the_version_header_of_a_handshake_request_must_be_one_we_speak(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, "2025-11-25")
    ok = await call(client, {**headers, "MCP-Protocol-Version": "2025-11-25"}, session, rpc("ping"))
    assert ok.status_code == 200
    bad = await call(client, {**headers, "MCP-Protocol-Version": "2099-01-01"}, session, rpc("ping"))
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32022


async def test_a_browser_page_of_an_allowed_origin_may_send_a_2026_07_28_request(
        app: Any, settings: Settings, factory: Factory) -> None:
    """A browser sends a request only with the headers its preflight allowed: a 2026-07-28 call carries
    MCP-Protocol-Version, Mcp-Method and Mcp-Name besides the credential and the body's type."""
    origin = "https://inspector.example.com"
    browser = create_app(settings.model_copy(update={"mcp_allowed_origins": origin}), registry=app.state.registry)
    async with browser.router.lifespan_context(browser):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=browser), base_url="http://localhost") as c:
            ws = await factory.workspace()
            sent = modern_headers(ws, "tools/call", "prism_entity_crud")
            requested = ["authorization", "content-type", "mcp-protocol-version", "mcp-method", "mcp-name"]
            assert {h.lower() for h in sent} >= set(requested)
            preflight = await c.options(PATH, headers={
                "Host": ws.host, "Origin": origin, "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": ", ".join(requested)})
            assert preflight.status_code == 204
            allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
            assert set(requested) | {"mcp-session-id", "last-event-id", "accept"} <= allowed
            assert "POST" in preflight.headers["access-control-allow-methods"]
            called = await c.post(PATH, headers={**sent, "Origin": origin}, json=rpc("tools/call", envelope(
                {"name": "prism_entity_crud", "arguments": LIST_PARTS})))
            assert called.status_code == 200 and called.json()["result"]["isError"] is False
            assert called.headers["access-control-allow-origin"] == "*"


async def test_a_resource_uri_that_is_not_a_string_is_invalid_params_and_its_batch_is_answered(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """The uri is never echoed unless it is a string: one nested deeper than an answer can be written (300 levels)
    was put in the error's data, and the whole POST, the batch's other answers with it, became a 500."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, "2025-03-26")
    deep: Any = "x"
    for _ in range(300):
        deep = [deep]
    answer = await call(client, headers, session, [rpc("ping", request_id=1),
                                                   rpc("resources/read", {"uri": deep}, request_id=2)])
    assert answer.status_code == 200, answer.text
    by_id = {a["id"]: a for a in answer.json()}
    assert by_id[1]["result"] == {}
    assert by_id[2]["error"]["code"] == -32602 and "uri" not in by_id[2]["error"]["data"], by_id[2]


@pytest.mark.parametrize(("status", "code"), [(404, -32002), (400, -32602), (403, -32602), (429, -32004),
                                               (503, -32603)])
def test_a_refused_reading_tells_the_callers_mistake_from_a_limit_or_prisms_failure(status: int, code: int) -> None:
    refusal = PrismError("refused", status=status, code="some_refusal")
    refusal.headers = {"Retry-After": "5"} if status in (429, 503) else None  # type: ignore[attr-defined]
    error = resources.reading_refusal(refusal, "prism://documents/document/d1", "2025-06-18")
    assert error.code == code
    assert error.data.get("retry_after") == (5 if status in (429, 503) else None)
