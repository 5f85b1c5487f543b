"""Rate limits and the failed-authentication lockout (SPEC.md "Limits"); applied by the edge (prism.edge)."""

from __future__ import annotations

from prism.ratelimit.limiter import TIERS, RateLimiter, build_limiter
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked, Verdict

__all__ = ["TIERS", "LimiterUnavailable", "Locked", "RateLimiter", "Verdict", "build_limiter"]
