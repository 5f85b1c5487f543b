"""Per-address limits and the lockout, in front of every door (pure ASGI: a few µs per request).

- /.well-known/* is exempt from everything; /api/mcp/oauth/authorize* from the rate tiers.
- A locked-out address gets 429 + Retry-After on every other path, whatever it presents.
- Authentication endpoints count per address in `auth_endpoints` (key registration also in
  `key_registration`); ping and requests without an Authorization header in `anonymous`.
- Requests with a credential are counted per user once authenticated (`prism.ratelimit.guard`), and
  the MCP door counts per tenant itself.
- A 401 answered to a request that presented a credential is a failed authentication of its address.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prism.ratelimit.addresses import AddressResolver
from prism.ratelimit.headers import ratelimit_429_headers, x_ratelimit_headers
from prism.ratelimit.limiter import RateLimiter
from prism.ratelimit.verdict import Verdict
from prism.registry.mega_tools import tool_name as wire_name
from prism.web.responses import json_response

ADDRESS_STATE = "client_address"
VERDICT_STATE = "rate_limit_verdict"
# The verdict of the per-address tier this request was counted in, for a door that reports it (the MCP door).
ADDRESS_VERDICT_STATE = "rate_limit_address_verdict"
FAILURE_COUNTED_STATE = "auth_failure_counted"
MCP_PREFIX = "/api/mcp/sse"
KEY_REGISTRATION = "/api/mcp/api-keys/register"
AUTH_ENDPOINTS = frozenset({"/api/mcp/oauth/register", "/api/mcp/oauth/token", "/api/mcp/oauth/revoke", "/login",
                            KEY_REGISTRATION})
ANONYMOUS_ONLY = frozenset({"/api/v1/dev/ping"})
UNLIMITED_PREFIX = "/api/mcp/oauth/authorize"
EXEMPT_PREFIX = "/.well-known/"
BROWSER_PREFIXES = ("/login", "/logout", "/keys", UNLIMITED_PREFIX, "/admin/")


def door_error_body(path: str, code: str, message: str) -> dict[str, Any]:
    """The refusal in the shape of the door the path belongs to (SPEC.md "Errors")."""
    if path.startswith("/api/mcp/tools/"):
        return {"success": False, "error": code, "message": message, "tool_name": path.split("/")[4]}
    if path.startswith("/prism/"):
        return {"success": False, "error": code, "message": message, "tool_name": wire_name(path.split("/")[2])}
    if path.startswith("/api/mcp/oauth/"):
        return {"error": code, "error_description": message}
    if path.startswith(MCP_PREFIX):
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message, "data": {"error": code}}}
    if path.rstrip("/") == "/api/v1/dev/call":
        return {"error": code, "message": message, "tool_name": None}
    return {"error": code, "message": message}


def limited_message(verdict: Verdict) -> str:
    return (f"rate limit of {verdict.limit} requests per minute reached; "
            f"retry in {verdict.retry_after} s")


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp, *, limiter: RateLimiter, addresses: AddressResolver) -> None:
        self.app = app
        self.limiter = limiter
        self.addresses = addresses

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self.app(scope, receive, self._closing(send))
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if path.startswith(EXEMPT_PREFIX):
            await self.app(scope, receive, send)
            return
        has_credential = False
        forwarded: str | None = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                has_credential = True
            elif name == b"x-forwarded-for":
                forwarded = value.decode("latin-1")
        client = scope.get("client")
        address = self.addresses.resolve(client[0] if client else None, forwarded)
        state = scope.setdefault("state", {})
        state[ADDRESS_STATE] = address
        limiter = self.limiter

        blocked = await limiter.locked_out(address)
        if blocked is not None:
            seconds = max(1, math.ceil(blocked))
            headers = {"Retry-After": str(seconds)}
            if path.startswith(MCP_PREFIX):  # X-RateLimit-* on every MCP answer: the lockout, as a window
                headers.update({"X-RateLimit-Limit": str(limiter.lockout.failures), "X-RateLimit-Remaining": "0",
                                "X-RateLimit-Reset": str(seconds)})
            await self._refuse(scope, receive, send, path, "too_many_failed_attempts",
                               f"too many failed authentication attempts from {address}; retry in {seconds} s",
                               headers)
            return

        if not path.startswith(UNLIMITED_PREFIX):
            bare = path.rstrip("/")
            if bare in AUTH_ENDPOINTS:
                tiers: tuple[str, ...] = ("auth_endpoints", "key_registration") if bare == KEY_REGISTRATION \
                    else ("auth_endpoints",)
            elif not has_credential or bare in ANONYMOUS_ONLY:
                tiers = ("anonymous",)
            else:
                tiers = ()
            for tier in tiers:
                verdict = await limiter.hit(tier, address)
                if not verdict.allowed:
                    headers = ratelimit_429_headers(verdict)
                    if path.startswith(MCP_PREFIX):
                        headers.update(x_ratelimit_headers(verdict))
                    await self._refuse(scope, receive, send, path, "rate_limited", limited_message(verdict),
                                       headers)
                    return
                state[ADDRESS_VERDICT_STATE] = verdict

        async def observe(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                if status == 401 and has_credential and not state.get(FAILURE_COUNTED_STATE):
                    await limiter.auth_failed(address)  # a door that authenticated without the guard
                elif status == 429 and VERDICT_STATE in state:
                    message = _with_retry_after(message, state[VERDICT_STATE])
            await send(message)

        await self.app(scope, receive, observe)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, path: str, code: str, message: str,
                      headers: dict[str, str]) -> None:
        response: Response
        if path.startswith(BROWSER_PREFIXES):  # a person reads this one: a page, not JSON
            from prism.web.browser import render  # imported late: the browser module needs web.requests first

            response = render(Request(scope, receive), "message.html",
                              {"heading": "Too many requests", "error": code, "message": message}, status=429)
            response.headers.update(headers)
        else:
            response = json_response(door_error_body(path, code, message), 429, headers)
        await response(scope, receive, send)

    def _closing(self, send: Send) -> Send:
        async def closing_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.limiter.close()
            await send(message)

        return closing_send


def _with_retry_after(message: Message, verdict: Verdict) -> Message:
    """A door that rendered a per-user refusal without its headers still answers Retry-After."""
    headers = list(message.get("headers", ()))
    if any(name.lower() == b"retry-after" for name, _ in headers):
        return message
    headers += [(k.lower().encode(), v.encode()) for k, v in ratelimit_429_headers(verdict).items()]
    return {**message, "headers": headers}
