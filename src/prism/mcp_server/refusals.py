"""The MCP door's error shape: a JSON-RPC error without an id, and X-RateLimit-* on every answer (SPEC.md "Limits").

The rate-limit window a request was counted in is the edge's (the tenant's, or the address's before the caller
is known); a locked-out address is described as a window of the lockout's size, exhausted, in X-RateLimit-* and
RateLimit-* alike.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Scope

from prism.edge.context import request_context
from prism.edge.doors import Door
from prism.edge.lockout import LockedOut
from prism.errors import PrismError
from prism.mcp_server import jsonrpc
from prism.mcp_server.http import cors_headers
from prism.mcp_server.jsonrpc import RpcError
from prism.oauth.challenge import bearer_challenge
from prism.ratelimit.headers import x_ratelimit_headers

PATH = "/api/mcp/sse"
_RPC_CODE = {401: jsonrpc.UNAUTHORIZED, 413: jsonrpc.PAYLOAD_TOO_LARGE, 429: jsonrpc.RATE_LIMITED}


def rate_headers(scope: Scope) -> dict[str, str]:
    """X-RateLimit-* of the window this request was counted in."""
    verdict = request_context(scope).verdict
    return x_ratelimit_headers(verdict) if verdict is not None else {}


class JsonRpcDoor(Door):
    def body(self, error: PrismError, scope: Scope) -> dict[str, Any]:
        code = _RPC_CODE.get(error.status, jsonrpc.INTERNAL_ERROR if error.status >= 500 else jsonrpc.INVALID_REQUEST)
        return RpcError(code, error.message, data={"error": error.code}).body(None)

    def headers(self, error: PrismError, scope: Scope) -> dict[str, str] | None:
        origin = request_context(scope).headers.get("origin")
        cors = {name.decode(): value.decode() for name, value in cors_headers(origin)}
        headers = {**cors, **rate_headers(scope), **(getattr(error, "headers", None) or {})}
        if isinstance(error, LockedOut):  # both families, as on a rate-limit 429 (SPEC.md "Limits")
            failures = str(scope["app"].state.rate_limiter.lockout.failures)
            reset = headers.get("Retry-After", "1")
            for prefix in ("X-RateLimit", "RateLimit"):
                headers.update({f"{prefix}-Limit": failures, f"{prefix}-Remaining": "0", f"{prefix}-Reset": reset})
        if error.status in (401, 429):  # a client throttled before it signs in must still find the way to sign in
            headers["WWW-Authenticate"] = bearer_challenge(scope, error, resource_path=PATH)
        return headers


JSON_RPC = JsonRpcDoor()

