"""Limits applied where a door authenticates (`prism.web.requests.authenticate_head`).

This runs on every credentialed REST call, including the canonical door's fast path that skips the
middleware stack, so it checks the lockout itself when the middleware has not, counts a refused
credential as a failed authentication, and then counts the request in the caller's per-user tier.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from typing import Any

from starlette.requests import Request

from prism.auth.context import AuthContext
from prism.errors import RateLimited, Unauthenticated
from prism.ratelimit.addresses import UNKNOWN, AddressResolver
from prism.ratelimit.headers import ratelimit_429_headers
from prism.ratelimit.limiter import RateLimiter
from prism.ratelimit.middleware import (
    ADDRESS_STATE,
    FAILURE_COUNTED_STATE,
    MCP_PREFIX,
    VERDICT_STATE,
    limited_message,
)
from prism.ratelimit.verdict import Verdict
from prism.tenancy.hosts import HostInfo

Scope = MutableMapping[str, Any]

# Users whose role grants this permission (owner and admin: `*`; a custom role may name it) get the
# admin ceiling instead of the authenticated one.
ADMIN_PERMISSION = "admin.access"


class LockedOut(RateLimited):
    code = "too_many_failed_attempts"


def locked_out_error(address: str, seconds_left: float) -> LockedOut:
    seconds = max(1, math.ceil(seconds_left))
    error = LockedOut(f"too many failed authentication attempts from {address}; retry in {seconds} s")
    error.headers = {"Retry-After": str(seconds)}
    return error


async def authenticate_limited(scope: Scope, host: HostInfo, authorization: str | None,
                               organization_context: str | None, forwarded_for: str | None) -> AuthContext:
    """The caller of a request, from its Authorization (and X-Organization-Context) header.

    `forwarded_for` (X-Forwarded-For) counts only when the peer is a trusted proxy.
    """
    app_state = scope["app"].state
    limiter: RateLimiter = app_state.rate_limiter
    state = scope.get("state")
    address = state.get(ADDRESS_STATE) if state else None
    if address is None:  # the middleware did not see this request: check the lockout here
        address = address_of(scope, forwarded_for)
        left = await limiter.locked_out(address)
        if left is not None:
            raise locked_out_error(address, left)
    try:
        auth: AuthContext = await app_state.authenticator.authenticate(authorization, host, organization_context)
    except Unauthenticated:
        if authorization:
            scope.setdefault("state", {})[FAILURE_COUNTED_STATE] = True
            await limiter.auth_failed(address)
        raise
    if not scope["path"].startswith(MCP_PREFIX):  # the MCP door counts per tenant
        verdict = await limiter.hit(user_tier(auth), auth.user_id)
        if not verdict.allowed:
            raise over_limit(scope, verdict)
    return auth


def user_tier(auth: AuthContext) -> str:
    return "admin" if auth.permissions.allows(ADMIN_PERMISSION) else "authenticated"


def over_limit(scope: Scope, verdict: Verdict) -> RateLimited:
    """The refusal of a request over its tier's ceiling (the middleware reads the verdict for its headers)."""
    scope.setdefault("state", {})[VERDICT_STATE] = verdict
    error = RateLimited(limited_message(verdict))
    error.headers = ratelimit_429_headers(verdict)
    return error


def address_of(scope: Scope, forwarded_for: str | None) -> str:
    """The address limits and the lockout count against: the peer, or X-Forwarded-For from a trusted proxy."""
    state = scope.get("state")
    address = state.get(ADDRESS_STATE) if state else None
    if address is None:
        resolver: AddressResolver = scope["app"].state.client_addresses
        client = scope.get("client")
        address = resolver.resolve(client[0] if client else None, forwarded_for)
        scope.setdefault("state", {})[ADDRESS_STATE] = address
    return str(address) if address else UNKNOWN


def client_address(request: Request) -> str:
    """`address_of` for a Starlette request; the header is parsed only when a proxy could have set it."""
    resolver: AddressResolver = request.app.state.client_addresses
    return address_of(request.scope, request.headers.get("x-forwarded-for") if resolver.proxies else None)
