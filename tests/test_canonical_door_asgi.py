"""The canonical door driven with hand-made ASGI messages: the headers, the body and the answer, at the edges.

These tests can send what HTTP clients normalise away: repeated headers, bodies in pieces, bytes that are not
UTF-8, a client that leaves mid-body. A request under a root path must answer like one without.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
import pytest

from prism.web.requests import MAX_BODY_BYTES
from prism.web.responses import json_response, send_json
from tests.factories import Factory, Workspace

PATH = "/api/mcp/tools/prism_entity_crud/"
LIST = orjson.dumps({"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}})

Header = tuple[bytes, bytes]


class Answer:
    """The answer. Through the edge it ends with X-Request-ID (a new one per request, checked here): `headers`
    are the door's own, so that two requests' answers compare equal."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[Header] = []
        self.request_id = b""
        self.body = b""

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [(bytes(k), bytes(v)) for k, v in message["headers"]]
            if self.headers and self.headers[-1][0] == b"x-request-id":
                self.request_id = self.headers.pop()[1]
                assert len(self.request_id) == 32, self.request_id
        else:
            self.body += message.get("body", b"")

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)

    def json(self) -> Any:
        return orjson.loads(self.body)


def receiver(chunks: list[bytes], *, disconnect: bool = False) -> tuple[Callable[[], Awaitable[dict[str, Any]]],
                                                                     list[int]]:
    """`receive` handing out the body in `chunks` (then, if asked, a disconnect); and a count of its calls."""
    calls = [0]

    async def receive() -> dict[str, Any]:
        calls[0] += 1
        index = calls[0] - 1
        if index < len(chunks):
            more = index < len(chunks) - 1 or disconnect
            return {"type": "http.request", "body": chunks[index], "more_body": more}
        return {"type": "http.disconnect"}

    return receive, calls


async def call(app: Any, headers: list[Header], chunks: list[bytes], *, root_path: str = "", path: str = PATH,
               disconnect: bool = False) -> tuple[Answer, list[int]]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": root_path + path, "raw_path": (root_path + path).encode(), "query_string": b"",
             "root_path": root_path, "headers": headers, "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 80)}
    receive, calls = receiver(chunks, disconnect=disconnect)
    answer = Answer()
    await app(scope, receive, answer.send)
    return answer, calls


def headers_for(ws: Workspace, key: str | bytes | None = None, *extra: Header,
                length: int | None = None) -> list[Header]:
    token = ws.keys["owner"] if key is None else key
    out: list[Header] = [(b"host", ws.host.encode())]
    if token != b"":
        out.append((b"authorization", b"Bearer " + (token if isinstance(token, bytes) else token.encode())))
    out.append((b"content-type", b"application/json"))
    if length is not None:
        out.append((b"content-length", str(length).encode()))
    return [*out, *extra]


@pytest.fixture
async def ws(factory: Factory) -> Workspace:
    return await factory.workspace(roles=("owner",))


async def test_a_call_succeeds_and_answers_like_a_starlette_json_response(app: Any, ws: Workspace) -> None:
    answer, _ = await call(app, headers_for(ws, length=len(LIST)), [LIST])
    assert answer.status == 200, answer.body
    body = answer.json()
    assert body["success"] is True and body["tool_name"] == "prism_entity_crud"
    assert answer.headers == [(b"content-length", str(len(answer.body)).encode()),
                              (b"content-type", b"application/json")]


@pytest.mark.parametrize(("content", "status", "headers"), [
    ({"success": True, "data": [1, {"a": None}], "tool_name": "t"}, 200, None),
    ({"success": False, "error": "x"}, 401, {"WWW-Authenticate": 'Bearer realm="prism"'}),
    ({"success": False, "error": "rate_limited"}, 429, {"Retry-After": "7", "RateLimit-Limit": "10"}),
    ({"success": False, "error": "oversight_required"}, 202, None),
    ({"success": False, "error": "internal_error"}, 500, {}),
])
async def test_send_json_sends_what_json_response_sends(content: Any, status: int,
                                                        headers: dict[str, str] | None) -> None:
    raw, starlette = Answer(), Answer()
    await send_json(raw.send, content, status, headers)
    response = json_response(content, status, headers)
    await response({"type": "http"}, None, starlette.send)  # type: ignore[arg-type]
    assert (raw.status, raw.headers, raw.body) == (starlette.status, starlette.headers, starlette.body)


@pytest.mark.parametrize("case", ["success", "no credential", "unknown key", "not json", "not an object",
                                  "unknown tool", "too large"])
async def test_a_root_path_changes_nothing_in_the_answer(app: Any, ws: Workspace, case: str) -> None:
    body = {"not json": b"{nope", "not an object": b"[1, 2]", "too large": b"{}"}.get(case, LIST)
    keys: dict[str, str | bytes] = {"no credential": b"", "unknown key": "ck_" + "x" * 40}
    key = keys.get(case)
    extra: list[Header] = [(b"content-length", str(MAX_BODY_BYTES + 1).encode())] if case == "too large" else []
    path = "/api/mcp/tools/prism_nope/" if case == "unknown tool" else PATH
    headers = headers_for(ws, key, *extra)
    fast, _ = await call(app, headers, [body], path=path)
    routed, _ = await call(app, headers, [body], path=path, root_path="/base")
    assert (fast.status, fast.headers, fast.body) == (routed.status, routed.headers, routed.body)
    expected = {"success": 200, "no credential": 401, "unknown key": 401, "not json": 400, "not an object": 400,
                "unknown tool": 404, "too large": 413}[case]
    assert fast.status == expected, fast.body
    if expected == 401:
        challenge = fast.header(b"www-authenticate")
        assert challenge is not None and challenge.startswith(b'Bearer realm="prism"')
        assert b"resource_metadata=" in challenge


async def test_a_tool_path_with_more_segments_is_no_route(app: Any, ws: Workspace) -> None:
    scope_path = "/api/mcp/tools/prism_entity_crud/extra/"
    answer = Answer()
    receive, _ = receiver([LIST])
    await app({"type": "http", "method": "POST", "path": scope_path, "raw_path": scope_path.encode(),
               "root_path": "", "query_string": b"", "headers": headers_for(ws), "client": ("127.0.0.1", 1),
               "server": ("127.0.0.1", 80), "scheme": "http", "http_version": "1.1", "asgi": {"version": "3.0"}},
              receive, answer.send)
    assert answer.status == 404 and answer.json()["error"] == "not_found"


async def test_repeated_headers_take_the_first_value_as_starlette_does(app: Any, ws: Workspace) -> None:
    good = (b"authorization", f"Bearer {ws.keys['owner']}".encode())
    bad = (b"authorization", b"Bearer ck_" + b"y" * 40)
    first_good, _ = await call(app, [*headers_for(ws, b""), good, bad], [LIST])
    first_bad, _ = await call(app, [*headers_for(ws, b""), bad, good], [LIST])
    assert first_good.status == 200, first_good.body
    assert first_bad.status == 401 and first_bad.json()["error"] == "invalid_token"


async def test_a_body_in_pieces_without_a_length_is_read_whole(app: Any, ws: Workspace) -> None:
    pieces = [LIST[:10], b"", LIST[10:30], LIST[30:]]
    answer, calls = await call(app, headers_for(ws), pieces)
    assert answer.status == 200, answer.body
    assert calls[0] == len(pieces)


async def test_a_streamed_body_over_the_cap_is_refused_as_it_grows(app: Any, ws: Workspace) -> None:
    piece = b" " * (256 * 1024)
    answer, calls = await call(app, headers_for(ws), [piece] * 8)  # 2 MiB, no Content-Length
    assert answer.status == 413 and answer.json()["error"] == "payload_too_large"
    assert calls[0] == 5  # refused with the piece that crossed 1 MiB, the rest never read


async def test_a_declared_length_over_the_cap_is_refused_without_reading(app: Any, ws: Workspace) -> None:
    answer, calls = await call(app, headers_for(ws, length=MAX_BODY_BYTES + 1), [LIST])
    assert answer.status == 413 and answer.json() == {
        "success": False, "error": "payload_too_large", "message": f"request body exceeds {MAX_BODY_BYTES} bytes",
        "tool_name": "prism_entity_crud"}
    assert calls[0] == 0


@pytest.mark.parametrize("length", [b"", b"abc", b"-5", b"1e3", "²".encode("latin-1"), b"\xff\xfe", b" 12"])
async def test_a_content_length_that_is_no_number_is_not_a_length(app: Any, ws: Workspace, length: bytes) -> None:
    answer, _ = await call(app, [*headers_for(ws), (b"content-length", length)], [LIST])
    assert answer.status == 200, answer.body


@pytest.mark.parametrize("name", [b"authorization", b"host", b"x-organization-context", b"x-prism-mission",
                                  b"x-prism-oversight-request", b"x-forwarded-for", b"content-type"])
async def test_header_bytes_that_are_not_utf8_get_a_clear_answer(app: Any, ws: Workspace, name: bytes) -> None:
    value = b"Bearer ck_\xff\xfe" + b"z" * 38 if name == b"authorization" else b"\xff\xfe\x80caf\xe9"
    headers = [(k, v) for k, v in headers_for(ws) if k != name or name == b"host"]
    if name == b"host":
        headers = [(b"host", value), *headers[1:]]
    else:
        headers.append((name, value))
    answer, _ = await call(app, headers, [LIST])
    assert answer.status < 500, answer.body
    body = answer.json()
    assert body["tool_name"] == "prism_entity_crud" and isinstance(body["success"], bool)
    if name == b"authorization":
        assert answer.status == 401 and answer.header(b"www-authenticate") is not None


async def test_a_client_gone_before_its_body_arrived_gets_no_answer_and_nothing_runs(app: Any, ws: Workspace) -> None:
    # Nobody is left to read an answer: the door stops there, without dispatching and without a logged 500.
    answer, _ = await call(app, headers_for(ws), [LIST[:5]], disconnect=True)
    assert answer.status == 0 and answer.body == b""
