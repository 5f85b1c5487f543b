"""The MCP door's limits, through the shared limiter: X-RateLimit-* on every answer (SPEC.md "Limits").

- A caller the door knows counts against its tenant: 600 requests per minute (`limit`).
- An answer given before the caller is known (CORS preflight, 405, 401, an unknown tenant) has no tenant to
  count against: the request counts in its address's `anonymous` tier, and the headers describe that
  window (`limit_unattributed`). A request without a credential was counted there already by the rate-limit
  middleware, which hands its verdict over; one whose credential failed is counted here.
"""

from __future__ import annotations

from typing import Any

from prism.auth.context import AuthContext
from prism.mcp_server.jsonrpc import RATE_LIMITED, RpcError
from prism.ratelimit.guard import address_of
from prism.ratelimit.headers import ratelimit_429_headers, x_ratelimit_headers
from prism.ratelimit.middleware import ADDRESS_VERDICT_STATE
from prism.ratelimit.verdict import Verdict

TIER = "mcp"
UNATTRIBUTED_TIER = "anonymous"


class RateLimited(Exception):
    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        super().__init__("rate limited")
        self.headers = headers
        self.error = RpcError(RATE_LIMITED, "Rate limit reached for this tenant on the MCP door; retry after "
                              "the Retry-After delay", data={"error": "rate_limited"})


def _encode(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode(), value.encode()) for name, value in headers.items()]


async def limit(state: Any, auth: AuthContext) -> list[tuple[bytes, bytes]]:
    """Count this request against its tenant; the X-RateLimit-* headers, or RateLimited (a 429) past the ceiling."""
    limiter = getattr(state, "rate_limiter", None)
    if limiter is None:  # an application built without rate limits (prism.ratelimit.install_rate_limits)
        return []
    return _headers_of(await limiter.hit(TIER, auth.tenant_id))


async def limit_unattributed(scope: Any, forwarded_for: str | None) -> list[tuple[bytes, bytes]]:
    """The X-RateLimit-* of a request answered before its caller is known; RateLimited past the address's
    anonymous ceiling."""
    limiter = getattr(scope["app"].state, "rate_limiter", None)
    if limiter is None:
        return []
    state = scope.get("state")
    verdict: Verdict | None = state.get(ADDRESS_VERDICT_STATE) if state else None
    if verdict is None:
        verdict = await limiter.hit(UNATTRIBUTED_TIER, address_of(scope, forwarded_for))
    return _headers_of(verdict)


def _headers_of(verdict: Verdict) -> list[tuple[bytes, bytes]]:
    headers = _encode(x_ratelimit_headers(verdict))
    if not verdict.allowed:
        raise RateLimited([*headers, *_encode(ratelimit_429_headers(verdict))])
    return headers
