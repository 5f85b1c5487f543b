"""The MCP door's ceiling: 600 requests per minute per tenant (SPEC.md "Limits"), through the shared limiter."""

from __future__ import annotations

from typing import Any

from prism.auth.context import AuthContext
from prism.mcp_server.jsonrpc import RATE_LIMITED, RpcError
from prism.ratelimit.headers import ratelimit_429_headers, x_ratelimit_headers

TIER = "mcp"


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
    verdict = await limiter.hit(TIER, auth.tenant_id)
    headers = _encode(x_ratelimit_headers(verdict))
    if not verdict.allowed:
        raise RateLimited([*headers, *_encode(ratelimit_429_headers(verdict))])
    return headers
