"""Raw ASGI plumbing for the MCP door: request headers, bodies, responses and CORS.

The door is a plain ASGI handler rather than a Starlette endpoint: it sits on the hot path of every agent
call, and the protocol is small enough that a Request object and routing per method buy nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import ClientDisconnect

from prism.mcp_server.jsonrpc import PAYLOAD_TOO_LARGE, RpcError, dumps
from prism.web.requests import MAX_BODY_BYTES, PayloadTooLarge
from prism.web.requests import read_body as web_read_body
from prism.web.responses import send_answer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ALLOWED_METHODS = "GET, POST, OPTIONS"  # DELETE, and any other method, is answered 405: a session has nothing to end
EXPOSED_HEADERS = ("Mcp-Session-Id, WWW-Authenticate, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, "
                   "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After")
# Every request header an MCP client sends from a page: a browser refuses to send a header the preflight does not
# allow, so a 2026-07-28 request (which mirrors its method and tool name in Mcp-Method and Mcp-Name) would never
# leave the page without them.
ALLOWED_HEADERS = ("Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, "
                   "Mcp-Name, Last-Event-ID")


async def read_body(receive: Receive, declared: str | None) -> bytes:
    """prism.web.requests.read_body, with its refusal as the JSON-RPC error this door answers. A client that
    went away mid-body gets an empty body: there is nobody left to answer."""
    try:
        return await web_read_body(receive, declared.encode("latin-1") if declared is not None else None)
    except PayloadTooLarge:
        raise _too_large() from None
    except ClientDisconnect:
        return b""


def _too_large() -> RpcError:
    return RpcError(PAYLOAD_TOO_LARGE, f"request body exceeds {MAX_BODY_BYTES} bytes",
                    data={"error": "payload_too_large"})


def cors_headers(origin: str | None) -> list[tuple[bytes, bytes]]:
    # Credentials travel in the Authorization header, never in cookies, so `*` exposes nothing: a page can only
    # use a token it already holds. Which origins may call at all is the edge's decision (prism.edge.hosts).
    # Nothing is sent for non-browser clients.
    if origin is None:
        return []
    return [(b"access-control-allow-origin", b"*"), (b"access-control-expose-headers", EXPOSED_HEADERS.encode()),
            (b"vary", b"Origin")]


async def preflight(send: Send, extra: list[tuple[bytes, bytes]]) -> None:
    """The preflight's answer; `extra` holds the answer's CORS and rate-limit headers already (each once: a
    browser fails a check whose Access-Control-Allow-Origin holds two values)."""
    headers = [(b"access-control-allow-methods", ALLOWED_METHODS.encode()),
               (b"access-control-allow-headers", ALLOWED_HEADERS.encode()), (b"access-control-max-age", b"86400"),
               (b"content-length", b"0"), *extra]
    await send_answer(send, 204, b"", headers)


async def respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]],
                  content_type: bytes = b"application/json") -> None:
    out = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
           (b"cache-control", b"no-store"), (b"pragma", b"no-cache"), *headers]  # HTTP/1.0 caches too
    if not body:
        out = out[1:]
    await send_answer(send, status, body, out)


async def respond_json(send: Send, status: int, value: Any, headers: list[tuple[bytes, bytes]]) -> None:
    await respond(send, status, dumps(value), headers)


async def respond_sse(send: Send, messages: list[Any], headers: list[tuple[bytes, bytes]]) -> None:
    """A POST answered as an event stream: one `message` event per response, then the stream ends."""
    body = b"".join(b"event: message\ndata: " + dumps(m) + b"\n\n" for m in messages)
    await respond(send, 200, body, headers, content_type=b"text/event-stream")


def accepts(accept: str | None) -> tuple[bool, bool]:
    """Whether the client takes (JSON, an event stream). No Accept header means anything; a type's quality is
    that of the most specific range naming it, and 0 means "not acceptable" (RFC 9110 12.4.2 and 12.5.1)."""
    if accept is None:
        return True, True
    qualities: dict[str, float] = {}
    for part in accept.split(","):
        media_range, *parameters = part.split(";")
        media_range = media_range.strip().lower()
        if media_range:
            qualities[media_range] = max(qualities.get(media_range, 0.0), _quality(parameters))

    def acceptable(media_type: str) -> bool:
        kind = media_type.split("/")[0]
        specific = next((r for r in (media_type, f"{kind}/*", "*/*") if r in qualities), None)
        return specific is not None and qualities[specific] > 0

    return acceptable("application/json"), acceptable("text/event-stream")


def _quality(parameters: list[str]) -> float:
    """A media range's q (1 when absent; a q that is not a number counts as 1, as if it were absent)."""
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(max(float(value.strip()), 0.0), 1.0)
            except ValueError:
                return 1.0
    return 1.0
