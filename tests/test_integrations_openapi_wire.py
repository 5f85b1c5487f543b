"""What an imported OpenAPI operation's call puts on the wire, compared with what OpenAPI 3.0/3.1 requires.

The upstream here records each request exactly as it arrived (raw path, raw query, headers, body bytes),
unlike tests/integrations_upstream.py, which decodes before it checks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prism.integrations import upstream
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    RunningService,
    upstream_tls_fixture,
)
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


@dataclass
class Received:
    method: str
    raw_path: str
    raw_query: str
    headers: list[tuple[str, str]]
    body: bytes

    def header_values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]


@dataclass
class Recorder:
    """Answers every request 200 `{"ok": true}` (or what `answers` scripts) and keeps it as it arrived."""

    received: list[Received] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    answer_status: int = 200
    answer_type: str = "application/json"
    answer_body: bytes = b'{"ok": true}'
    port: int = 0

    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/api"

    async def token(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode()))
        self.token_requests.append(form)
        token = f"tok-{len(self.token_requests)}-{form.get('scope', '')}"
        return Response(orjson.dumps({"access_token": token, "token_type": "Bearer", "expires_in": 3600}),
                        media_type="application/json")

    async def handle(self, request: Request) -> Response:
        self.received.append(Received(
            request.method, request.scope["raw_path"].decode("latin-1"),
            request.scope["query_string"].decode("latin-1"),
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]],
            await request.body()))
        return Response(self.answer_body, status_code=self.answer_status, media_type=self.answer_type)

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/oauth/token", self.token, methods=["POST"]),
            Route("/{path:path}", self.handle, methods=["GET", "PUT", "POST", "DELETE", "PATCH", "HEAD"])])


@pytest.fixture(name="recorder")
async def recorder_fixture(tls: TlsFiles) -> AsyncIterator[Recorder]:
    running = RunningService(Recorder(), tls)  # type: ignore[arg-type]  # duck-typed: app() and port
    yield await running.start()  # type: ignore[misc]
    await running.stop()


def document(paths: dict[str, Any]) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "Wire", "version": "1"}, "paths": paths}


async def connected(client: httpx.AsyncClient, ws: Workspace, spec: dict[str, Any], recorder: Recorder,
                    **connection: Any) -> str:
    name = "wire_" + uuid.uuid4().hex[:10]
    await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
             {"name": name, "spec": orjson.dumps(spec).decode()})
    await ok(client, ws, "config_manage/integrations/connection/set",
             {"name": name, "base_url": recorder.url(), "auth_kind": "none", **connection})
    return name


async def call(client: httpx.AsyncClient, ws: Workspace, name: str, entity: str, operation: str,
               arguments: dict[str, Any]) -> httpx.Response:
    return await post(client, ws, f"integration_call/{name}/{entity}/{operation}", arguments)


def param(name: str, where: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema, **({"required": True} if where == "path" else {}), **extra}


STRINGS = {"type": "array", "items": {"type": "string"}}
OBJECT = {"type": "object", "properties": {"R": {"type": "integer"}, "G": {"type": "integer"}}}
ANSWER = {"200": {"description": "ok"}}


async def test_path_parameter_reserved_characters_reach_the_upstream_percent_encoded(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """RFC 3986 §2.2 / OpenAPI: a path parameter's value is percent-encoded, reserved characters included;
    `;` `,` `=` in a path segment are delimiters (matrix parameters: Tomcat/Spring drop what follows `;`)."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/files/{name}": {"get": {"tags": ["files"], "operationId": "getFile",
                                               "parameters": [param("name", "path", {"type": "string"})],
                                               "responses": ANSWER}}})
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "files", "getFile", {"name": "report;v=2,final"})
    assert answered.status_code == 200, answered.text
    assert recorder.received[-1].raw_path == "/api/files/report%3Bv%3D2%2Cfinal"



async def test_a_path_parameter_cannot_become_a_dot_segment_with_a_matrix_parameter(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """Prism refuses `..` as a path parameter (upstream.py: "resolving the URL would move the request to another
    path"). `..;` is the same dot segment on Tomcat/Spring, which strip `;params` from each segment before they
    normalise (`/users/..;/sessions` is `/sessions`): it must reach the service as `..%3B` (or be refused), never
    with a literal `;` — else a caller allowed one operation has another path of the service run instead."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/users/{id}/sessions": {"delete": {
        "tags": ["users"], "operationId": "endUserSessions", "responses": ANSWER,
        "parameters": [param("id", "path", {"type": "string"})]}}})
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "users", "endUserSessions", {"id": "..;"})
    if answered.status_code == 400:
        assert answered.json()["error"] == "invalid_arguments" and recorder.received == []
        return
    assert answered.status_code == 200, answered.text
    assert [r.raw_path for r in recorder.received] == ["/api/users/..%3B/sessions"]

async def test_header_parameter_arrays_and_objects_use_the_simple_style(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """OpenAPI 3.0.3 "Style Values": header parameters are `simple`: an array `blue,black,brown`, an object
    `R,100,G,200` (explode=false, the default) — not JSON."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/colors": {"get": {"tags": ["colors"], "operationId": "listColors", "parameters": [
        param("X-Colors", "header", STRINGS), param("X-Rgb", "header", OBJECT)], "responses": ANSWER}}})
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "colors", "listColors",
                          {"X-Colors": ["blue", "black", "brown"], "X-Rgb": {"R": 100, "G": 200}})
    assert answered.status_code == 200, answered.text
    got = recorder.received[-1]
    assert got.header_values("x-colors") == ["blue,black,brown"]
    assert got.header_values("x-rgb") == ["R,100,G,200"]


async def test_path_parameter_styles_label_matrix_and_objects(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """OpenAPI "Style Values": matrix `;color=blue,black`, label `.blue,black` (RFC 6570's `{.list}`, as OpenAPI
    3.1.1 corrected its 3.0.3 table, which showed `.blue.black`), simple object `R,100,G,200`."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({
        "/m/{ids}": {"get": {"tags": ["m"], "operationId": "matrixIds", "responses": ANSWER,
                             "parameters": [param("ids", "path", STRINGS, style="matrix")]}},
        "/l/{ids}": {"get": {"tags": ["m"], "operationId": "labelIds", "responses": ANSWER,
                             "parameters": [param("ids", "path", STRINGS, style="label")]}},
        "/o/{rgb}": {"get": {"tags": ["m"], "operationId": "objectRgb", "responses": ANSWER,
                             "parameters": [param("rgb", "path", OBJECT)]}}})
    name = await connected(client, ws, spec, recorder)
    for operation, arguments in (("matrixIds", {"ids": ["blue", "black"]}), ("labelIds", {"ids": ["blue", "black"]}),
                                 ("objectRgb", {"rgb": {"R": 100, "G": 200}})):
        answered = await call(client, ws, name, "m", operation, arguments)
        assert answered.status_code == 200, answered.text
    # A comma between items may be sent as it is or as %2C; the style's `;`, `=` and `.` are the point here.
    assert [r.raw_path.replace("%2C", ",") for r in recorder.received] == [
        "/api/m/;ids=blue,black", "/api/l/.blue,black", "/api/o/R,100,G,200"]


async def test_form_body_array_properties_are_repeated(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """OpenAPI 3.0.3 Encoding Object: in application/x-www-form-urlencoded a property's style defaults to `form`
    and explode to true, so an array property is `tag=a&tag=b` — not the JSON text `["a","b"]`."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/subscriptions": {"post": {
        "tags": ["subscriptions"], "operationId": "createSubscription", "responses": ANSWER,
        "requestBody": {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": {
            "type": "object", "properties": {"customer": {"type": "string"}, "tag": STRINGS}}}}}}}})
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "subscriptions", "createSubscription",
                          {"body": {"customer": "cus 1", "tag": ["a", "b"]}})
    assert answered.status_code == 200, answered.text
    got = recorder.received[-1]
    assert got.header_values("content-type") == ["application/x-www-form-urlencoded"]
    assert parse_qsl(got.body.decode()) == [("customer", "cus 1"), ("tag", "a"), ("tag", "b")]


async def test_a_changed_oauth_scope_or_token_url_is_used_at_the_next_call(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """docs/integrations.md: a connection is replaced by `connection/set`; the OAuth access token is kept "until
    30 s before it expires" — but a token obtained for other settings (another scope, another token endpoint)
    is not the connection's token any more."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/items": {"get": {"tags": ["items"], "operationId": "listItems", "responses": ANSWER}}})
    oauth = {"auth_kind": "oauth2_client_credentials", "client_id": "prism", "secret": "client-s3cret",
             "token_url": f"https://127.0.0.1:{recorder.port}/oauth/token", "scope": "items:read"}
    name = await connected(client, ws, spec, recorder, **oauth)
    assert (await call(client, ws, name, "items", "listItems", {})).status_code == 200
    assert recorder.received[-1].header_values("authorization") == ["Bearer tok-1-items:read"]

    # The administrator widens the scope (same client, same secret).
    await ok(client, ws, "config_manage/integrations/connection/set",
             {"name": name, "base_url": recorder.url(), **oauth, "scope": "items:read items:write"})
    assert (await call(client, ws, name, "items", "listItems", {})).status_code == 200
    assert [t.get("scope") for t in recorder.token_requests] == ["items:read", "items:read items:write"]
    assert recorder.received[-1].header_values("authorization") == ["Bearer tok-2-items:read items:write"]


async def test_the_oauth_tokens_a_process_holds_are_bounded(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each change of a connection's credential asks for a token of its own, and the old one is never asked for
    again: the process keeps at most TOKENS_KEPT (the oldest go), never an ever-growing pile."""
    monkeypatch.setattr(upstream, "_TOKENS", {})
    monkeypatch.setattr(upstream, "TOKENS_KEPT", 2)
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/items": {"get": {"tags": ["items"], "operationId": "listItems", "responses": ANSWER}}})
    oauth = {"auth_kind": "oauth2_client_credentials", "client_id": "prism", "secret": "client-s3cret",
             "token_url": f"https://127.0.0.1:{recorder.port}/oauth/token"}
    name = await connected(client, ws, spec, recorder, **oauth, scope="s0")
    for scope in ("s0", "s1", "s2", "s3"):
        await ok(client, ws, "config_manage/integrations/connection/set",
                 {"name": name, "base_url": recorder.url(), **oauth, "scope": scope})
        assert (await call(client, ws, name, "items", "listItems", {})).status_code == 200
    assert len(upstream._TOKENS) == 2
    assert [t.get("scope") for t in recorder.token_requests] == ["s0", "s1", "s2", "s3"]
    assert (await call(client, ws, name, "items", "listItems", {})).status_code == 200  # the newest is kept
    assert len(recorder.token_requests) == 4


async def test_accept_header_admits_the_media_type_the_operation_answers_with(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """An operation whose description answers only text/csv: `Accept: application/json` alone asks for what the
    service never produces (Spring, JAX-RS answer 406 Not Acceptable, RFC 9110 §12.5.1)."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/reports/{id}": {"get": {
        "tags": ["reports"], "operationId": "exportReport", "parameters": [param("id", "path", {"type": "string"})],
        "responses": {"200": {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}}}}})
    recorder.answer_type, recorder.answer_body = "text/csv", b"a,b\n1,2\n"
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "reports", "exportReport", {"id": "r1"})
    assert answered.status_code == 200, answered.text
    accept = ",".join(recorder.received[-1].header_values("accept"))
    assert "text/csv" in accept or "*/*" in accept, accept



async def test_an_integer_argument_written_as_7_0_reaches_the_service_as_an_integer(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """JSON Schema counts 7.0 as an integer, so the check lets it through; the path must then say `7` (what
    `type: integer` means on the wire), not `7.0`, which the service's integer route does not match."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/items/{itemId}": {"get": {
        "tags": ["items"], "operationId": "getItem", "responses": ANSWER,
        "parameters": [param("itemId", "path", {"type": "integer"}), param("page", "query", {"type": "integer"})]}}})
    name = await connected(client, ws, spec, recorder)
    answered = await client.post("/api/mcp/tools/prism_integration_call/", headers=ws.headers("owner"),
                                 content=b'{"app": "%s", "entity": "items", "operation": "getItem", '
                                         b'"arguments": {"itemId": 7.0, "page": 2.0}}' % name.encode())
    if answered.status_code == 400:  # refusing it is as good
        assert answered.json()["error"] == "invalid_arguments"
        return
    assert answered.status_code == 200, answered.text
    got = recorder.received[-1]
    assert (got.raw_path, got.raw_query) == ("/api/items/7", "page=2")


async def test_a_text_answer_is_decoded_with_its_declared_charset(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """A 2xx answer's text is passed on; `text/plain; charset=iso-8859-1` says how its bytes read."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/greeting": {"get": {"tags": ["greeting"], "operationId": "getGreeting", "responses": {
        "200": {"description": "text", "content": {"text/plain": {"schema": {"type": "string"}}}}}}}})
    recorder.answer_type, recorder.answer_body = "text/plain; charset=iso-8859-1", "Grüße aus Köln".encode("latin-1")
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "greeting", "getGreeting", {})
    assert answered.status_code == 200, answered.text
    assert answered.json()["data"]["body"] == "Grüße aus Köln"


async def test_a_query_parameter_described_by_content_is_sent_as_that_media_type(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """OpenAPI 3.0.3 Parameter Object: `content` instead of `schema` says how the value is serialized; with
    application/json the query carries the JSON text: `filter={"status":"open","owner":"ann"}` — not
    `status=open&owner=ann`, two parameters the operation does not have."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/tickets": {"get": {"tags": ["tickets"], "operationId": "listTickets", "responses": ANSWER,
                                          "parameters": [{"name": "filter", "in": "query", "content": {
                                              "application/json": {"schema": {"type": "object"}}}}]}}})
    name = await connected(client, ws, spec, recorder)
    answered = await call(client, ws, name, "tickets", "listTickets",
                          {"filter": {"status": "open", "owner": "ann"}})
    assert answered.status_code == 200, answered.text
    sent = parse_qsl(recorder.received[-1].raw_query)
    assert [k for k, _ in sent] == ["filter"], sent
    assert orjson.loads(sent[0][1]) == {"status": "open", "owner": "ann"}


async def test_a_header_argument_cannot_stand_in_for_the_credential_or_frame_the_request(
        client: httpx.AsyncClient, factory: Factory, recorder: Recorder) -> None:
    """HTTP header names are case-insensitive: a description's `x-api-key` parameter is the connection's
    `X-API-Key` credential header, and the credential is sent, never the caller's value beside it. A header
    parameter named as one Prism sets (in any case) or that frames the request is not offered; nor is one whose
    name is not a plain header name."""
    ws = await factory.workspace(roles=("owner",))
    spec = document({"/items": {"get": {"tags": ["items"], "operationId": "listItems", "responses": ANSWER,
                                        "parameters": [param(n, "header", {"type": "string"}) for n in (
                                            "x-api-key", "X-Trace", "X_Request_Id", "TRANSFER-ENCODING",
                                            "AUTHORIZATION", "X-Bad Name", "X-Split\r\nHost")]}}})
    name = await connected(client, ws, spec, recorder, auth_kind="api_key", header="X-API-Key",
                           secret="the-connections-key")
    answered = await call(client, ws, name, "items", "listItems", {"x-api-key": "chosen-by-caller",
                                                                    "X-Trace": "t-1", "X_Request_Id": "r-1"})
    assert answered.status_code == 200, answered.text
    got = recorder.received[-1]
    assert got.header_values("x-api-key") == ["the-connections-key"]
    assert got.header_values("x-trace") == ["t-1"]
    assert got.header_values("x_request_id") == ["r-1"]  # an HTTP token: real descriptions use `_`
    assert "chosen-by-caller" not in str(got.headers)
    for unoffered in ("TRANSFER-ENCODING", "AUTHORIZATION", "X-Bad Name", "X-Split\r\nHost"):
        refused = await call(client, ws, name, "items", "listItems", {unoffered: "x"})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text[:300]
    assert len(recorder.received) == 1
