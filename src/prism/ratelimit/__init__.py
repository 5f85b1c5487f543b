"""Rate limits and the failed-authentication lockout (SPEC.md "Limits"); see docs/ratelimits.md."""

from __future__ import annotations

from starlette.applications import Starlette

from prism.config import Settings
from prism.ratelimit.addresses import AddressResolver, parse_proxies
from prism.ratelimit.guard import client_address
from prism.ratelimit.limiter import TIERS, RateLimiter, build_limiter
from prism.ratelimit.middleware import RateLimitMiddleware
from prism.ratelimit.verdict import Verdict

__all__ = ["TIERS", "RateLimiter", "Verdict", "client_address", "install_rate_limits"]


def install_rate_limits(app: Starlette, settings: Settings) -> RateLimiter:
    """`app.state.rate_limiter` and `app.state.client_addresses`, and the middleware in front of every door."""
    limiter = build_limiter(settings)
    addresses = AddressResolver(parse_proxies(settings.trusted_proxies))
    app.state.rate_limiter = limiter
    app.state.client_addresses = addresses
    app.add_middleware(RateLimitMiddleware, limiter=limiter, addresses=addresses)
    return limiter
