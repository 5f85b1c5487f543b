"""The MCP door's streamable HTTP protocol at /api/mcp/sse, message by message, on the real app and database."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from tests.factories import Factory, Workspace

PATH = "/api/mcp/sse"
JSON_AND_SSE = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {"page_size": 5}}


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if request_id is not None:
        message["id"] = request_id
    return message


def headers_for(ws: Workspace, label: str = "owner", **extra: str) -> dict[str, str]:
    return {**ws.headers(label), **JSON_AND_SSE, **extra}


async def initialize(client: httpx.AsyncClient, headers: dict[str, str], version: str = "2025-03-26") -> str:
    answer = await client.post(PATH, headers=headers, json=rpc("initialize", {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    assert answer.status_code == 200, answer.text
    session: str = answer.headers["mcp-session-id"]
    return session


async def call(client: httpx.AsyncClient, headers: dict[str, str], session: str, message: Any) -> httpx.Response:
    # Latin-1, as HTTP carries header bytes: a client may send any.
    return await client.post(PATH, headers={**headers, "Mcp-Session-Id": session.encode("latin-1")}, json=message)


def tool_text(answer: httpx.Response) -> tuple[bool, dict[str, Any]]:
    result = answer.json()["result"]
    return result["isError"], json.loads(result["content"][0]["text"])


@pytest.mark.parametrize(("offered", "answered"), [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"), ("2099-01-01", "2025-11-25"), ("2026-07-28", "2025-11-25")])
async def test_initialize_answers_the_offered_revision_or_our_latest_with_tools_capability_and_a_session(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, offered: str, answered: str) -> None:
    ws = await factory.workspace()
    answer = await client.post(PATH, headers=headers_for(ws), json=rpc("initialize", {
        "protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["protocolVersion"] == answered
    assert result["capabilities"]["tools"] == {"listChanged": False}
    assert result["serverInfo"]["name"] == "prism"
    # The instructions lead a model to the utility tools that find an operation: search first, then browse.
    instructions = result["instructions"]
    assert "prism_search" in instructions and "prism_introspect" in instructions
    assert instructions.index("prism_search") < instructions.index("prism_introspect")
    assert answer.headers["mcp-session-id"]
    assert answer.headers["x-ratelimit-limit"] == str(settings.rate_limit_mcp)


async def test_initialized_notification_is_accepted_with_202_and_no_body(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    answer = await call(client, headers, session, rpc("notifications/initialized", request_id=None))
    assert answer.status_code == 202 and answer.content == b""
    ping = await call(client, headers, session, rpc("ping", request_id=7))
    assert ping.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}


@pytest.mark.parametrize("path", [PATH, PATH + "/"])
async def test_both_spellings_of_the_path_answer_directly_without_redirect(
        client: httpx.AsyncClient, factory: Factory, path: str) -> None:
    ws = await factory.workspace()
    answer = await client.post(path, headers=headers_for(ws), json=rpc("initialize", {}))
    assert answer.status_code == 200 and "mcp-session-id" in answer.headers


async def test_requests_without_a_session_after_the_handshake_are_400(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await client.post(PATH, headers=headers_for(ws), json=rpc("tools/list"))
    assert answer.status_code == 400
    assert answer.json()["error"]["data"]["error"] == "session_required"


async def test_a_forged_or_tampered_session_is_404(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    tampered = session[:-1] + ("0" if session[-1] != "0" else "1")
    # The last one's signature is not ASCII (a header is whatever a client sends): 404 too, not a 500.
    for bad in (tampered, "nonsense", session.replace("2025-03-26", "2024-11-05"), session[:-1] + "\u00e9"):
        answer = await call(client, headers, bad, rpc("tools/list"))
        assert answer.status_code == 404, bad
        assert answer.json()["error"]["data"]["error"] == "session_not_found"


async def test_a_session_opened_by_one_key_is_refused_to_another_key_of_the_same_tenant(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    session = await initialize(client, headers_for(ws, "owner"))
    answer = await call(client, headers_for(ws, "member"), session, rpc("tools/list"))
    assert answer.status_code == 404


async def test_a_session_of_tenant_a_is_refused_to_tenant_b(client: httpx.AsyncClient, factory: Factory) -> None:
    a, b = await factory.workspace(), await factory.workspace()
    session = await initialize(client, headers_for(a))
    answer = await call(client, headers_for(b), session, rpc("tools/list"))
    assert answer.status_code == 404


async def test_a_key_of_tenant_a_on_tenant_b_host_is_401(client: httpx.AsyncClient, factory: Factory) -> None:
    a, b = await factory.workspace(), await factory.workspace()
    answer = await client.post(PATH, headers={**headers_for(a), "Host": b.host}, json=rpc("initialize", {}))
    assert answer.status_code == 401
    assert answer.json()["error"]["data"]["error"] == "invalid_token"


async def test_missing_credential_is_401_naming_the_protected_resource_metadata(client: httpx.AsyncClient) -> None:
    answer = await client.post(PATH, headers=JSON_AND_SSE, json=rpc("initialize", {}))
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        'Bearer realm="prism", resource_metadata="http://localhost/.well-known/oauth-protected-resource/api/mcp/sse"')
    assert answer.json()["error"]["data"]["error"] == "authentication_required"


async def test_delete_and_get_with_a_session_are_405(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    deleted = await client.delete(PATH, headers={**headers, "Mcp-Session-Id": session})
    assert deleted.status_code == 405 and "POST" in deleted.headers["allow"]
    stream = await client.get(PATH, headers={**headers, "Mcp-Session-Id": session, "Accept": "text/event-stream"})
    assert stream.status_code == 405


@pytest.mark.parametrize("path", [PATH, PATH + "/"])
async def test_every_method_the_door_does_not_serve_gets_the_same_json_rpc_405(
        client: httpx.AsyncClient, factory: Factory, path: str) -> None:
    ws = await factory.workspace()
    for method in ("DELETE", "PUT", "PATCH", "HEAD"):
        answer = await client.request(method, path, headers=headers_for(ws))
        assert answer.status_code == 405, (method, answer.text)
        assert answer.headers["allow"] == "GET, POST, OPTIONS", method
        if method != "HEAD":
            assert answer.json()["error"]["data"] == {"error": "method_not_allowed"}, method


async def test_content_type_and_accept_are_negotiated(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    wrong_type = await client.post(PATH, headers={**headers, "Content-Type": "text/plain"},
                                   content=json.dumps(rpc("initialize", {})))
    assert wrong_type.status_code == 415
    wrong_accept = await client.post(PATH, headers={**headers, "Accept": "text/html"}, json=rpc("initialize", {}))
    assert wrong_accept.status_code == 406
    session = await initialize(client, headers)
    as_stream = await call(client, {**headers, "Accept": "text/event-stream"}, session, rpc("ping", request_id=3))
    assert as_stream.status_code == 200
    assert as_stream.headers["content-type"].startswith("text/event-stream")
    assert as_stream.text == 'event: message\ndata: {"jsonrpc":"2.0","id":3,"result":{}}\n\n'


async def test_bad_json_and_bad_messages_are_json_rpc_errors_never_500(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    parse = await client.post(PATH, headers={**headers, "Mcp-Session-Id": session}, content=b"{nope")
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
    bodies: list[Any] = [[], {"id": 1, "method": "ping"}, "text", {"jsonrpc": "2.0", "id": [1], "method": "ping"}]
    for body in bodies:
        answer = await call(client, headers, session, body)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == -32600, body
    unknown = await call(client, headers, session, rpc("prompts/list"))
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601
    bad_params = await call(client, headers, session, {"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                                       "params": [1]})
    assert bad_params.json()["error"]["code"] == -32602


async def test_a_request_refused_for_its_params_is_answered_with_its_own_id(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """JSON-RPC 2.0 answers id null only when the id could not be read; clients match answers by id."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)  # 2025-03-26: batches allowed
    alone = await call(client, headers, session, {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": [1]})
    assert alone.status_code == 400
    assert alone.json()["id"] == 7 and alone.json()["error"]["code"] == -32602
    batch = await call(client, headers, session, [
        rpc("ping", request_id=1), {"jsonrpc": "2.0", "id": "two", "method": "tools/list", "params": "x"}])
    assert [(a["id"], a.get("error", {}).get("code")) for a in batch.json()] == [(1, None), ("two", -32602)]


async def test_a_refusal_of_the_session_or_the_batch_names_the_one_request_it_refuses(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """JSON-RPC 2.0 section 5: the id is null only when it could not be read. A transport refusal given after the
    body was read names the request when there is exactly one; two ids cannot share one answer."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    no_session = await client.post(PATH, headers=headers, json=rpc("tools/list", request_id=51))
    unknown_session = await call(client, headers, "nonsense", rpc("tools/list", request_id="fifty-two"))
    session = await initialize(client, headers, "2025-11-25")
    one_in_batch = await call(client, headers, session, [rpc("ping", request_id=53),
                                                         rpc("notifications/initialized", request_id=None)])
    two_in_batch = await call(client, headers, session, [rpc("ping", request_id=54), rpc("ping", request_id=55)])
    assert [(a.status_code, a.json()["id"], a.json()["error"]["data"]["error"])
            for a in (no_session, unknown_session, one_in_batch, two_in_batch)] == [
        (400, 51, "session_required"), (404, "fifty-two", "session_not_found"), (400, 53, "batch_not_supported"),
        (400, None, "batch_not_supported")]


async def test_initialize_sent_as_a_notification_is_refused_and_opens_no_session(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await client.post(PATH, headers=headers_for(ws), json=rpc(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}, request_id=None))
    assert answer.status_code == 400 and "mcp-session-id" not in answer.headers
    assert "result" not in answer.json()
    assert answer.json()["id"] is None and answer.json()["error"]["code"] == -32600


async def test_a_batch_gets_one_answer_per_request_and_none_for_notifications(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers)
    answer = await call(client, headers, session, [
        rpc("ping", request_id=1), rpc("notifications/initialized", request_id=None),
        rpc("tools/call", {"name": "prism_entity_crud", "arguments": LIST_PARTS}, request_id=2), {"bad": True}])
    assert answer.status_code == 200
    answers = answer.json()
    assert [a["id"] for a in answers] == [1, 2, None]
    assert answers[1]["result"]["isError"] is False and answers[2]["error"]["code"] == -32600
    only_notes = await call(client, headers, session, [rpc("notifications/initialized", request_id=None)])
    assert only_notes.status_code == 202
    # A notification is never answered, not even when its params are not an object; a request with the same
    # fault is, with its id.
    malformed_note = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": [1]}
    mixed = await call(client, headers, session, [malformed_note, {**malformed_note, "method": "ping", "id": 7}])
    assert mixed.status_code == 200 and [(a["id"], a["error"]["code"]) for a in mixed.json()] == [(7, -32602)]
    assert (await call(client, headers, session, [malformed_note])).status_code == 400  # nothing of it accepted
    batched_init = await call(client, headers, session, [rpc("initialize", {}), rpc("ping", request_id=2)])
    assert batched_init.status_code == 400


async def test_cors_preflight_needs_no_credential_and_exposes_the_session_header(
        client: httpx.AsyncClient, factory: Factory) -> None:
    preflight = await client.options(PATH, headers={
        "Origin": "http://localhost", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-session-id"})
    assert preflight.status_code == 204
    assert "Mcp-Session-Id" in preflight.headers["access-control-allow-headers"]
    assert "POST" in preflight.headers["access-control-allow-methods"]
    ws = await factory.workspace()
    answer = await client.post(PATH, headers={**headers_for(ws), "Origin": f"http://{ws.host}"},
                               json=rpc("initialize", {}))
    exposed = answer.headers["access-control-expose-headers"]
    assert "Mcp-Session-Id" in exposed and "WWW-Authenticate" in exposed
    refused = await client.post(PATH, headers={**JSON_AND_SSE, "Origin": "http://localhost"},
                                json=rpc("initialize", {}))
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == "*"


async def test_an_oversized_body_is_413(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await client.post(PATH, headers=headers_for(ws), content=b" " * (1024 * 1024 + 1))
    assert answer.status_code == 413


async def test_the_tenant_ceiling_gives_429_with_retry_after_and_x_ratelimit_on_every_answer(
        settings: Settings, factory: Factory) -> None:
    limited = create_app(settings.model_copy(update={"rate_limit_mcp": 3}))
    async with limited.router.lifespan_context(limited):
        transport = httpx.ASGITransport(app=limited)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            ws, other = await factory.workspace(), await factory.workspace()
            remaining = []
            for _ in range(3):
                answer = await c.post(PATH, headers=headers_for(ws), json=rpc("initialize", {}))
                assert answer.status_code == 200
                remaining.append(answer.headers["x-ratelimit-remaining"])
            assert remaining == ["2", "1", "0"]
            refused = await c.post(PATH, headers=headers_for(ws, "member"), json=rpc("initialize", {}))
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.headers["ratelimit-limit"] == "3" and refused.headers["x-ratelimit-remaining"] == "0"
            assert refused.json()["error"]["data"]["error"] == "rate_limited"
            # The ceiling is per tenant: another tenant is unaffected.
            assert (await c.post(PATH, headers=headers_for(other), json=rpc("initialize", {}))).status_code == 200


@pytest.mark.parametrize("declared", [b"\xb2", b"\xd9\xa3", b"-1", b"12abc"])
async def test_a_content_length_that_is_not_ascii_digits_is_never_a_500(app: Any, factory: Factory,
                                                                         declared: bytes) -> None:
    """Latin-1 b"\\xb2" is "²", which str.isdigit() accepts and int() refuses."""
    from tests.test_canonical_door_asgi import call as raw_call  # the raw ASGI driver: httpx would fix the header up

    ws = await factory.workspace()
    headers = [(k.lower().encode(), v.encode()) for k, v in headers_for(ws).items()]
    body = json.dumps(rpc("ping")).encode()
    answer, _ = await raw_call(app, [*headers, (b"content-length", declared)], [body], path=PATH)
    assert answer.status < 500, answer.body


async def test_answers_given_before_the_caller_is_known_carry_the_address_window(
        settings: Settings, factory: Factory) -> None:
    """SPEC: X-RateLimit-* on every MCP response. Preflight, 405, 401 and an unknown tenant have no tenant to
    count against: they count in the address's anonymous discovery tier (every OAuth connection starts with an
    anonymous 401 here), and report that window."""
    limited = create_app(settings.model_copy(update={"rate_limit_anonymous_discovery": 5}))
    async with limited.router.lifespan_context(limited):
        transport = httpx.ASGITransport(app=limited)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            ws = await factory.workspace()
            answers = [
                await c.options(PATH, headers={"Origin": "http://localhost",
                                               "Access-Control-Request-Method": "POST"}),
                await c.post(PATH, headers=JSON_AND_SSE, json=rpc("initialize", {})),
                await c.post(PATH, headers={**JSON_AND_SSE, "Authorization": "Bearer ck_not_a_real_key"},
                             json=rpc("initialize", {})),
                await c.delete(PATH, headers=headers_for(ws)),
                await c.post(PATH, headers={**headers_for(ws), "Host": "no-such-tenant.localhost"},
                             json=rpc("initialize", {})),
            ]
            assert [a.status_code for a in answers] == [204, 401, 401, 405, 404]
            for answer in answers:
                assert answer.headers["x-ratelimit-limit"] == "5", answer.headers
                assert int(answer.headers["x-ratelimit-reset"]) >= 1
            assert [a.headers["x-ratelimit-remaining"] for a in answers] == ["4", "3", "2", "1", "0"]
            # Past the address's ceiling: 429, with both header families and Retry-After.
            refused = await c.post(PATH, headers=JSON_AND_SSE, json=rpc("initialize", {}))
            assert refused.status_code == 429
            assert refused.headers["x-ratelimit-remaining"] == "0" and refused.headers["ratelimit-limit"] == "5"
            assert int(refused.headers["retry-after"]) >= 1
            # A known caller still counts against its tenant, not the address.
            known = await c.post(PATH, headers=headers_for(ws), json=rpc("initialize", {}))
            assert known.status_code == 200
            assert known.headers["x-ratelimit-limit"] == str(settings.rate_limit_mcp)


async def test_a_locked_out_address_gets_x_ratelimit_and_ratelimit_on_the_mcp_door(
        settings: Settings, factory: Factory) -> None:
    limited = create_app(settings.model_copy(update={"lockout_failures": 2}))
    async with limited.router.lifespan_context(limited):
        transport = httpx.ASGITransport(app=limited)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            ws = await factory.workspace()
            bad = {**JSON_AND_SSE, "Authorization": "Bearer ck_not_a_real_key"}
            for _ in range(2):
                assert (await c.post(PATH, headers=bad, json=rpc("initialize", {}))).status_code == 401
            locked = await c.post(PATH, headers=headers_for(ws), json=rpc("initialize", {}))
            assert locked.status_code == 429
            assert locked.headers["x-ratelimit-limit"] == "2" and locked.headers["x-ratelimit-remaining"] == "0"
            assert locked.headers["x-ratelimit-reset"] == locked.headers["retry-after"]
            # SPEC.md "Limits": RateLimit-* on a 429 of the MCP door, the lockout's as a rate limit's.
            assert locked.headers["ratelimit-limit"] == "2" and locked.headers["ratelimit-remaining"] == "0"
            assert locked.headers["ratelimit-reset"] == locked.headers["retry-after"]
