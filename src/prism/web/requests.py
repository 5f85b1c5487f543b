"""Reading what a client sent: the caller, the host, a JSON body — each failure a PrismError.

The edge (prism.edge) has already read the headers, the host and the credential into the request's context;
endpoints take them from there. Raw ASGI doors (the canonical dispatch doors, the MCP door) and Starlette
endpoints read their bodies through the same `read_body`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request

from prism.auth.context import AuthContext
from prism.edge.context import request_context
from prism.errors import BadRequest, PrismError
from prism.kit.nul import refuse_nul_in_json
from prism.tenancy.hosts import HostInfo

MAX_BODY_BYTES = 1024 * 1024

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class PayloadTooLarge(PrismError):
    code, status = "payload_too_large", 413


def host_of(request: Request) -> HostInfo:
    return request_context(request.scope).host


def caller(request: Request) -> AuthContext:
    """The authenticated caller of a request to a path that takes a Bearer credential (prism.edge.paths)."""
    return request_context(request.scope).caller()


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
    """The body as JSON; an empty body is None when not required. A string holding NUL anywhere in it is refused
    here, naming its field, for every door that reads JSON (see prism.kit.nul)."""
    if not body or body.isspace():  # `not body.strip()`, without copying the body
        if required:
            raise BadRequest("request body is required (JSON object)", code="missing_body")
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", code="invalid_json") from None
    refuse_nul_in_json(body, value)
    return value


def parse_json_object(body: bytes, *, required: bool = True) -> dict[str, Any]:
    """The body as a JSON object; an empty body is `{}` when not required. JSON `null` is not an object: it is
    refused like `[]` (docs/architecture.md "Errors")."""
    if not required and (not body or body.isspace()):
        return {}
    value = parse_json(body)
    if not isinstance(value, dict):
        raise BadRequest("body must be a JSON object", code="invalid_body")
    return value


def declared_length(scope: Scope) -> bytes | None:
    """The Content-Length the client declared, for `read_body`."""
    declared = request_context(scope).headers.get("content-length")
    return declared.encode("latin-1") if declared is not None else None


async def read_json(request: Request, *, required: bool = True) -> Any:
    body = await read_body(request.receive, declared_length(request.scope))
    return parse_json(body, required=required)


async def read_json_object(request: Request, *, required: bool = True) -> dict[str, Any]:
    body = await read_body(request.receive, declared_length(request.scope))
    return parse_json_object(body, required=required)
