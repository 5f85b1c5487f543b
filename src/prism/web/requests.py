"""Reading what a client sent: the host, the credential, a JSON body — each failure a PrismError.

One implementation, two entrances. Raw ASGI doors (the canonical dispatch doors) read `scope` and
`receive` themselves: `head_of`, `read_body`, `parse_json`. Starlette endpoints call the same functions
through `authenticate(request)` and `read_json(request)`. On the hottest path a Starlette Request costs
more than Prism's own work there: each `request.headers.get` walks the whole header list, and the body
goes through an async generator. The MCP door and the browser's forms read their bodies through
`read_body` too. (The MCP door's own `Headers` in `prism.mcp_server.http` could use `head_of`.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request

from prism.auth.context import AuthContext
from prism.errors import BadRequest, PrismError
from prism.ratelimit.guard import authenticate_limited
from prism.tenancy.hosts import HostInfo, classify_host

MAX_BODY_BYTES = 1024 * 1024

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class PayloadTooLarge(PrismError):
    code, status = "payload_too_large", 413


# The request headers Prism reads, by wire name (ASGI servers lower-case names), and their slot in RequestHead.
_HEADER_SLOTS = {b"host": 0, b"authorization": 1, b"x-organization-context": 2, b"content-length": 3,
                 b"x-forwarded-for": 4, b"x-prism-mission": 5, b"x-prism-oversight-request": 6}
_GOVERNANCE_NAMES = ("x-prism-mission", "x-prism-oversight-request")


class RequestHead:
    """The headers Prism reads, from one pass over the scope's header list.

    First value wins and values are decoded as Latin-1, as Starlette's `request.headers.get` does, so a
    request means the same on every door. `content_length` stays bytes: only ASCII digits count as a length.
    `governance` holds the mission and oversight headers the request carries (usually none).
    """

    __slots__ = ("authorization", "content_length", "forwarded_for", "governance", "host", "organization_context")

    def __init__(self, headers: Any) -> None:
        found: list[bytes | None] = [None] * 7
        for name, value in headers:
            slot = _HEADER_SLOTS.get(name)
            if slot is not None and found[slot] is None:
                found[slot] = value
        host, authorization, organization_context, self.content_length, forwarded_for, mission, oversight = found
        self.host = host.decode("latin-1") if host is not None else ""
        self.authorization = authorization.decode("latin-1") if authorization is not None else None
        self.organization_context = (organization_context.decode("latin-1")
                                     if organization_context is not None else None)
        self.forwarded_for = forwarded_for.decode("latin-1") if forwarded_for is not None else None
        self.governance: dict[str, str] = {}
        if mission is not None or oversight is not None:
            for name, value in zip(_GOVERNANCE_NAMES, (mission, oversight), strict=True):
                if value is not None:
                    self.governance[name] = value.decode("latin-1")


def head_of(scope: Scope) -> RequestHead:
    return RequestHead(scope["headers"])


def host_in(scope: Scope, head: RequestHead) -> HostInfo:
    return classify_host(head.host, scope["app"].state.settings.base_domain)


def host_of(request: Request) -> HostInfo:
    return classify_host(request.headers.get("host", ""), request.app.state.settings.base_domain)


def authenticate_head(scope: Scope, head: RequestHead) -> Awaitable[AuthContext]:
    # Through the rate-limit guard: lockout, failed-credential counting, the caller's per-user tier. (The guard's
    # coroutine is handed back, not awaited in one more of our own.)
    return authenticate_limited(scope, host_in(scope, head), head.authorization, head.organization_context,
                                head.forwarded_for)


async def authenticate(request: Request) -> AuthContext:
    return await authenticate_head(request.scope, head_of(request.scope))


def _too_large() -> PayloadTooLarge:
    return PayloadTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")


async def read_body(receive: Receive, declared_length: bytes | None) -> bytes:
    """The body, refused as soon as its declared length or what has arrived exceeds the cap (a body without
    Content-Length may stream). A client that disconnects midway raises ClientDisconnect, as Starlette does."""
    if declared_length is not None and declared_length.isdigit() and int(declared_length) > MAX_BODY_BYTES:
        raise _too_large()
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):  # the usual: one message
        body: bytes = message.get("body", b"")
        if len(body) > MAX_BODY_BYTES:
            raise _too_large()
        return body
    return await _read_rest(receive, message)


async def _read_rest(receive: Receive, message: MutableMapping[str, Any]) -> bytes:
    """The body of a request that did not arrive in one message, starting with its first `message`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        kind = message["type"]
        if kind == "http.request":
            chunk: bytes = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _too_large()
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        elif kind == "http.disconnect":
            raise ClientDisconnect()
        message = await receive()
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_json(body: bytes, *, required: bool = True) -> Any:
    """The body as JSON; an empty body is None when not required."""
    if not body or body.isspace():  # `not body.strip()`, without copying the body
        if required:
            raise BadRequest("request body is required (JSON object)", code="missing_body")
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", code="invalid_json") from None


def parse_json_object(body: bytes, *, required: bool = True) -> dict[str, Any]:
    value = parse_json(body, required=required)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("body must be a JSON object", code="invalid_body")
    return value


async def read_json(request: Request, *, required: bool = True) -> Any:
    body = await read_body(request.receive, head_of(request.scope).content_length)
    return parse_json(body, required=required)


async def read_json_object(request: Request, *, required: bool = True) -> dict[str, Any]:
    body = await read_body(request.receive, head_of(request.scope).content_length)
    return parse_json_object(body, required=required)
