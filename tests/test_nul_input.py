"""NUL (U+0000) in what a client sends: 400 naming the field, in each door's own error shape, on both engines.

PostgreSQL refuses NUL in text: without the check a NUL answered 500 there, and a NUL in a coordinate failed
the ledger batch of other callers' calls. Every test runs against a real `prism serve` on the suite's database
and checks, after the refusal, that a normal request on the same connection still works.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.factories import Factory, Workspace
from tests.live_prism import LiveServer, live_prism_fixture  # noqa: F401 -- the fixture
from tests.oauth_support import CLIENT_BODIES, OAUTH, field
from tests.processes import TRACEBACK

NUL_CODE = "nul_character"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {"page_size": 5}}
CANONICAL = "/api/mcp/tools/prism_entity_crud/"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
MCP = "/api/mcp/sse"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def refused(field_name: str) -> str:
    return f"{field_name}: must not contain NUL (U+0000)"


def _tracebacks(live_prism: LiveServer) -> int:
    return sum(server.stderr.count(TRACEBACK) for server in live_prism.pool.started)


@pytest.fixture(name="http")
async def http_fixture(live_prism: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    """One client, one kept-alive connection where the server allows it: the follow-up request of each test
    shows the refusal left neither the HTTP connection nor a database connection broken. The server logged
    no error meanwhile."""
    before = _tracebacks(live_prism)
    async with httpx.AsyncClient(base_url=live_prism.base_url, timeout=30) as client:
        yield client
    assert _tracebacks(live_prism) == before, live_prism.errors_logged()


def nul_problem(field_name: str) -> dict[str, Any]:
    """The details of every 400: `errors`, one `{field, message}` per problem."""
    return {"errors": [{"field": field_name, "message": refused(field_name).removeprefix(f"{field_name}: ")}]}


def assert_envelope_refusal(answer: httpx.Response, field_name: str, tool_name: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"success": False, "error": NUL_CODE, "message": refused(field_name),
                             "tool_name": tool_name, "details": nul_problem(field_name)}


def assert_plain_refusal(answer: httpx.Response, field_name: str, **extra: Any) -> None:
    """The `{error, message, details}` shape of the sandbox, webhook and key-registration endpoints."""
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": NUL_CODE, "message": refused(field_name), "details": nul_problem(field_name),
                             **extra}


def assert_oauth_refusal(answer: httpx.Response, field_name: str, error: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": error, "error_description": refused(field_name)}


# --- the canonical doors --------------------------------------------------------------------------------

@pytest.mark.parametrize(("envelope", "field_name"), [
    ({**LIST_PARTS, "arguments": {"search": "bolt\x00"}}, "arguments.search"),
    ({**LIST_PARTS, "arguments": {"page_size": 5, "ordering\x00": "name"}}, "arguments.ordering\\u0000"),
    ({**LIST_PARTS, "app": "spare\x00parts"}, "app"),
    ({**LIST_PARTS, "operation": "list\x00"}, "operation"),
    ({**LIST_PARTS, "mission_id": "mission\x00"}, "mission_id"),
])
async def test_a_nul_in_the_canonical_envelope_is_refused_naming_the_field(
        http: httpx.AsyncClient, factory: Factory, envelope: dict[str, Any], field_name: str) -> None:
    ws = await factory.workspace()
    assert_envelope_refusal(await http.post(CANONICAL, json=envelope, headers=ws.headers()), field_name,
                            "prism_entity_crud")
    normal = await http.post(CANONICAL, json=LIST_PARTS, headers=ws.headers())
    assert normal.status_code == 200 and normal.json()["success"] is True, normal.text


async def test_a_nul_in_the_body_of_a_coordinate_path_is_refused_naming_the_argument(
        http: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    path = "/prism/entity_crud/spare_parts/spare_part/list"
    answer = await http.post(path, json={"page_size": 5, "search": ["ok", "\x00"]}, headers=ws.headers())
    assert_envelope_refusal(answer, "search[1]", "prism_entity_crud")
    normal = await http.post(path, json={"page_size": 5}, headers=ws.headers())
    assert normal.status_code == 200 and normal.json()["success"] is True, normal.text


async def test_a_nul_in_a_coordinate_path_segment_is_refused(http: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await http.post("/prism/entity_crud/spare%00parts/spare_part/list", json={}, headers=ws.headers())
    assert answer.status_code == 400, answer.text
    assert answer.json()["message"] == refused("path") and answer.json()["details"] == nul_problem("path")


async def test_a_nul_in_a_tool_name_in_the_path_is_refused(http: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    answer = await http.post("/api/mcp/tools/prism_entity%00crud/", json=LIST_PARTS, headers=ws.headers())
    assert answer.status_code == 400, answer.text
    assert answer.json()["details"] == nul_problem("path")


async def test_a_nul_in_a_coordinate_never_fails_other_callers_calls(
        http: httpx.AsyncClient, factory: Factory) -> None:
    """The ledger writes many callers' entries in one batch: a NUL that reached it failed all of them."""
    poisoner, others = await factory.workspace(), await factory.workspace()
    bad = http.post(CANONICAL, json={**LIST_PARTS, "entity": "spare\x00part"}, headers=poisoner.headers())
    answers = await asyncio.gather(bad, *(http.post(CANONICAL, json=LIST_PARTS, headers=others.headers())
                                          for _ in range(20)))
    assert_envelope_refusal(answers[0], "entity", "prism_entity_crud")
    assert [a.status_code for a in answers[1:]] == [200] * 20


async def test_a_nul_in_the_mission_header_is_refused_by_the_http_server(live_prism: LiveServer,
                                                                         factory: Factory) -> None:
    """HTTP clients refuse to send it and the server refuses to read it: it never reaches Prism."""
    ws = await factory.workspace()
    host, port = live_prism.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = b'{"app":"spare_parts","entity":"spare_part","operation":"list","arguments":{}}'
    writer.write(b"POST " + CANONICAL.encode() + b" HTTP/1.1\r\nHost: " + ws.host.encode() +
                 b"\r\nAuthorization: " + ws.headers()["Authorization"].encode() +
                 b"\r\nX-Prism-Mission: m\x00m\r\nContent-Type: application/json\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400 "), answer


# --- the developer sandbox --------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "field_name", "tool_name"), [
    ({"name": "prism_entity_crud", "arguments": {**LIST_PARTS, "arguments": {"search": "\x00"}}},
     "arguments.arguments.search", None),
    ({"name": "prism_entity\x00crud", "arguments": LIST_PARTS}, "name", None),
])
async def test_a_nul_in_a_sandbox_call_is_refused_naming_the_field(
        http: httpx.AsyncClient, factory: Factory, body: dict[str, Any], field_name: str,
        tool_name: str | None) -> None:
    ws = await factory.workspace()
    answer = await http.post("/api/v1/dev/call/", json=body, headers=ws.headers())
    assert_plain_refusal(answer, field_name, tool_name=tool_name)
    normal = await http.post("/api/v1/dev/call/", json={"name": "prism_entity_crud", "arguments": LIST_PARTS},
                             headers=ws.headers())
    assert normal.status_code == 200 and "items" in normal.json(), normal.text


# --- the MCP door --------------------------------------------------------------------------------------

async def _mcp_session(http: httpx.AsyncClient, ws: Workspace) -> dict[str, str]:
    headers = {**ws.headers(), **MCP_HEADERS}
    answer = await http.post(MCP, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert answer.status_code == 200, answer.text
    return {**headers, "Mcp-Session-Id": answer.headers["mcp-session-id"]}



@pytest.mark.parametrize(("params", "field_name"), [
    ({"name": "prism_entity_crud", "arguments": {**LIST_PARTS, "arguments": {"search": "\x00"}}},
     "params.arguments.arguments.search"),
    ({"name": "prism_entity\x00crud", "arguments": LIST_PARTS}, "params.name"),
])
async def test_a_nul_in_an_mcp_tools_call_is_refused_naming_the_field(
        http: httpx.AsyncClient, factory: Factory, params: dict[str, Any], field_name: str) -> None:
    ws = await factory.workspace()
    headers = await _mcp_session(http, ws)
    answer = await http.post(MCP, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                          "params": params})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["message"] == refused(field_name)
    assert error["data"] == {"error": NUL_CODE, **nul_problem(field_name)}
    normal = await http.post(MCP, headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                                          "params": {"name": "prism_entity_crud",
                                                                     "arguments": LIST_PARTS}})
    assert normal.status_code == 200 and normal.json()["result"]["isError"] is False, normal.text


# --- OAuth ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "field_name"), [
    ({**CLIENT_BODIES["claude"], "client_name": "Cla\x00ude"}, "client_name"),
    ({**CLIENT_BODIES["claude"], "redirect_uris": ["https://example.com/cb\x00"]}, "redirect_uris[0]"),
    ({**CLIENT_BODIES["claude"], "client_id": "\x00"}, "client_id"),
])
async def test_a_nul_in_an_oauth_registration_is_refused_naming_the_field(
        http: httpx.AsyncClient, body: dict[str, Any], field_name: str) -> None:
    answer = await http.post(f"{OAUTH}/register/", json=body)
    assert_oauth_refusal(answer, field_name, "invalid_client_metadata")
    normal = await http.post(f"{OAUTH}/register/", json=CLIENT_BODIES["claude"])
    assert normal.status_code in (200, 201), normal.text


@pytest.mark.parametrize(("form", "field_name"), [
    ({"grant_type": "authorization_code", "code": "abc\x00", "code_verifier": "v", "client_id": "c"}, "code"),
    ({"grant_type": "refresh_token", "refresh_token": "\x00", "client_id": "c"}, "refresh_token"),
    ({"grant_type": "authorization_code", "code": "abc", "client_id": "cli\x00ent"}, "client_id"),
])
async def test_a_nul_in_the_token_form_is_refused_naming_the_field(
        http: httpx.AsyncClient, form: dict[str, str], field_name: str) -> None:
    assert_oauth_refusal(await http.post(f"{OAUTH}/token/", data=form), field_name, "invalid_request")
    client = (await http.post(f"{OAUTH}/register/", json=CLIENT_BODIES["claude"])).json()
    normal = await http.post(f"{OAUTH}/token/", data={"grant_type": "authorization_code", "code": "unknown",
                                                      "code_verifier": "v", "client_id": client["client_id"]})
    assert normal.status_code == 400 and normal.json()["error"] == "invalid_grant", normal.text


async def test_a_nul_in_basic_client_credentials_is_refused(http: httpx.AsyncClient) -> None:
    answer = await http.post(f"{OAUTH}/token/", auth=("cli\x00ent", "secret"),
                             data={"grant_type": "authorization_code", "code": "abc"})
    assert_oauth_refusal(answer, "client_id", "invalid_request")


async def test_a_nul_in_the_authorize_query_is_refused_naming_the_parameter(http: httpx.AsyncClient) -> None:
    answer = await http.get(f"{OAUTH}/authorize/", params={"response_type": "code", "client_id": "\x00"})
    assert answer.status_code == 400, answer.text
    assert refused("client_id") in answer.text


async def test_a_nul_in_the_sign_in_form_is_refused_naming_the_field(http: httpx.AsyncClient,
                                                                    factory: Factory) -> None:
    ws = await factory.workspace()
    page = await http.get("/login/")
    token = field(page.text, "csrf_token")
    answer = await http.post("/login/", data={"csrf_token": token, "email": "owner\x00@example.com", "password": "x"})
    assert answer.status_code == 400, answer.text
    assert refused("email") in answer.text
    normal = await http.post("/login/", data={"csrf_token": token, "email": ws.emails["owner"], "password": "wrong"})
    assert normal.status_code == 401, normal.text


async def test_a_non_ascii_csrf_token_is_refused_not_a_500(http: httpx.AsyncClient) -> None:
    await http.get("/login/")
    answer = await http.post("/login/", data={"csrf_token": "jeton-é", "email": "a@example.com", "password": "x"})
    assert answer.status_code == 403, answer.text


# --- webhooks ------------------------------------------------------------------------------------------

HOOK = {"name": "Receiver", "url": "https://example.com/hook"}


async def _create_hook(http: httpx.AsyncClient, ws: Workspace) -> dict[str, Any]:
    answer = await http.post(WEBHOOKS, json=HOOK, headers=ws.headers())
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


@pytest.mark.parametrize(("body", "field_name"), [
    ({**HOOK, "name": "Recei\x00ver"}, "name"),
    ({**HOOK, "description": "\x00"}, "description"),
    ({**HOOK, "filters": {"ai_system_ids": ["s\x00"]}}, "filters.ai_system_ids[0]"),
])
async def test_a_nul_in_a_new_webhook_is_refused_naming_the_field(
        http: httpx.AsyncClient, factory: Factory, body: dict[str, Any], field_name: str) -> None:
    ws = await factory.workspace()
    assert_plain_refusal(await http.post(WEBHOOKS, json=body, headers=ws.headers()), field_name)
    await _create_hook(http, ws)


async def test_a_nul_in_a_webhook_update_is_refused_naming_the_field(http: httpx.AsyncClient,
                                                                   factory: Factory) -> None:
    ws = await factory.workspace()
    hook = await _create_hook(http, ws)
    answer = await http.patch(f"{WEBHOOKS}{hook['id']}/", json={"name": "\x00"}, headers=ws.headers())
    assert_plain_refusal(answer, "name")
    normal = await http.patch(f"{WEBHOOKS}{hook['id']}/", json={"name": "Renamed"}, headers=ws.headers())
    assert normal.status_code == 200 and normal.json()["name"] == "Renamed", normal.text


async def test_a_nul_in_the_webhook_list_name_query_is_refused(http: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    assert_plain_refusal(await http.get(WEBHOOKS, params={"name": "Rec\x00"}, headers=ws.headers()), "name")
    assert (await http.get(WEBHOOKS, params={"name": "Rec"}, headers=ws.headers())).status_code == 200


@pytest.mark.parametrize("suffix", ["{id}%00/", "{id}/deliveries/%00abc/", "{id}/deliveries/%00/resend/"])
async def test_a_nul_in_a_webhook_or_delivery_id_is_refused(http: httpx.AsyncClient, factory: Factory,
                                                            suffix: str) -> None:
    ws = await factory.workspace()
    hook = await _create_hook(http, ws)
    method = "POST" if suffix.endswith("resend/") else "GET"
    answer = await http.request(method, WEBHOOKS + suffix.format(id=hook["id"]), headers=ws.headers())
    assert_plain_refusal(answer, "path")
    assert (await http.get(f"{WEBHOOKS}{hook['id']}/", headers=ws.headers())).status_code == 200


# --- key registration ------------------------------------------------------------------------------------

@pytest.mark.parametrize("field_name", ["email", "password", "name", "organization"])
async def test_a_nul_in_a_key_registration_is_refused_naming_the_field(
        http: httpx.AsyncClient, factory: Factory, field_name: str) -> None:
    ws = await factory.workspace()
    body = {"email": ws.emails["owner"], "password": "correct horse battery staple"}
    answer = await http.post("/api/mcp/api-keys/register/", json={**body, field_name: f"x\x00{uuid.uuid4().hex}"},
                             headers={"Host": ws.host})
    assert_plain_refusal(answer, field_name)
    normal = await http.post("/api/mcp/api-keys/register/", json=body, headers={"Host": ws.host})
    assert normal.status_code == 201, normal.text
