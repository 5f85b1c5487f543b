"""Rate-limit response headers: X-RateLimit-* on every MCP response, RateLimit-* + Retry-After on a 429."""

from __future__ import annotations

import math

from prism.errors import RateLimited
from prism.ratelimit.verdict import Verdict


def x_ratelimit_headers(verdict: Verdict) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(verdict.limit),
        "X-RateLimit-Remaining": str(verdict.remaining),
        "X-RateLimit-Reset": str(math.ceil(verdict.reset_after)),
    }


def ratelimit_429_headers(verdict: Verdict) -> dict[str, str]:
    return {
        "RateLimit-Limit": str(verdict.limit),
        "RateLimit-Remaining": str(verdict.remaining),
        "RateLimit-Reset": str(math.ceil(verdict.reset_after)),
        "Retry-After": str(max(1, verdict.retry_after)),
    }


def over_limit(verdict: Verdict, message: str | None = None) -> RateLimited:
    """The 429 of a request past `verdict`'s ceiling, with Retry-After and RateLimit-*."""
    error = RateLimited(message or f"rate limit of {verdict.limit} requests per minute reached; retry in "
                                   f"{verdict.retry_after} s")
    error.headers = ratelimit_429_headers(verdict)
    return error
