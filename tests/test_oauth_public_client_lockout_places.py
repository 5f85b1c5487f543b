"""A public client presents no secret at the token endpoint (RFC 6749 2.1: it cannot authenticate), so its
requests take none of the address's ten places for secrets being checked (docs/limits.md): a hosted
connector's users share a few addresses, and its refreshes queued behind other requests' guesses, then were
refused 429. It is still refused while the address is locked out, and an unknown client_id still counts."""

from __future__ import annotations

import asyncio
from typing import Any

from prism.config import Settings
from prism.ratelimit import RateLimiter
from tests.factories import Factory
from tests.limits_support import client_for, limited_app
from tests.oauth_support import OAUTH, browser, tokens_for

ADDRESS = "203.0.113.77"


async def test_a_public_clients_refresh_takes_no_place_and_waits_for_none(settings: Settings, app: Any,
                                                                          factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with limited_app(settings, app, rate_limit_auth_endpoints=10**6, rate_limit_anonymous=10**6) as limited:
        limiter: RateLimiter = limited.state.rate_limiter
        async with browser(limited, ws.host) as page:
            tokens = await tokens_for(page, ws)  # Claude's registration: a public client
        for i in range(10):  # ten secrets of this address being checked right now
            assert await limiter.reserve_attempt(ADDRESS, f"guess {i}") is True
        async with client_for(limited, ADDRESS) as c:
            started = asyncio.get_running_loop().time()
            refreshed = await c.post(f"{OAUTH}/token/", headers={"Host": ws.host}, data={
                "grant_type": "refresh_token", "client_id": tokens["client"]["client_id"],
                "refresh_token": tokens["refresh_token"]})
            waited = asyncio.get_running_loop().time() - started
            assert refreshed.status_code == 200 and waited < 2, (refreshed.text[:200], waited)
            unknown = await c.post(f"{OAUTH}/token/", headers={"Host": ws.host}, data={
                "grant_type": "refresh_token", "client_id": "no-such-client", "refresh_token": "x"})
            assert unknown.status_code == 400 and unknown.json()["error"] == "invalid_client", unknown.text


async def test_a_public_client_is_refused_while_its_address_is_locked_out(settings: Settings, app: Any,
                                                                         factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with limited_app(settings, app, rate_limit_auth_endpoints=10**6, rate_limit_anonymous=10**6,
                           lockout_failures=2) as limited:
        async with browser(limited, ws.host) as page:
            tokens = await tokens_for(page, ws)
        async with client_for(limited, ADDRESS) as c:
            for _ in range(2):  # unknown client_ids, named without a secret: counted as failures
                await c.post(f"{OAUTH}/token/", headers={"Host": ws.host}, data={
                    "grant_type": "refresh_token", "client_id": "no-such-client", "refresh_token": "x"})
            refused = await c.post(f"{OAUTH}/token/", headers={"Host": ws.host}, data={
                "grant_type": "refresh_token", "client_id": tokens["client"]["client_id"],
                "refresh_token": tokens["refresh_token"]})
        assert refused.status_code == 429 and refused.json()["error"] == "too_many_failed_attempts", refused.text
