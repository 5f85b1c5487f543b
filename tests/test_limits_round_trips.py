"""Redis round trips per request, counted by a private redis-server's own command statistics."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from prism.config import Settings
from prism.ratelimit import RateLimiter
from prism.ratelimit.limiter import ceilings_from
from prism.ratelimit.redis_backend import RedisBackend
from tests.factories import Factory
from tests.limits_support import RoundTrips, client_for, limited_app, private_redis

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server to start")
ROUNDS = 20
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
CEILINGS = ceilings_from(Settings())


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with private_redis(tmp_path) as url:
        yield url


@pytest.fixture
def round_trips(redis_url: str) -> Iterator[RoundTrips]:
    counter = RoundTrips(redis_url)
    yield counter
    counter.close()


async def test_an_authenticated_request_costs_one_redis_round_trip(
        settings: Settings, app: object, factory: Factory, redis_url: str, round_trips: RoundTrips) -> None:
    """A key the authenticator's cache accepts is counted with the lockout and the attempts in flight checked in
    the same script call; no attempt is reserved for it (prism.edge.stack). The first request, which loads the
    key, reserves one."""
    ws = await factory.workspace()
    async with limited_app(settings, app, redis_url=redis_url, credential_cache_seconds=60) as limited, \
            client_for(limited) as client:
        assert (await client.get("/api/v1/dev/me/", headers=ws.headers())).status_code == 200  # loads the scripts
        round_trips.since()
        for _ in range(ROUNDS):
            assert (await client.get("/api/v1/dev/me/", headers=ws.headers())).status_code == 200
        assert round_trips.since() == ROUNDS
        # The MCP door's tenant window the same way.
        for _ in range(ROUNDS):
            answer = await client.post("/api/mcp/sse", headers={**ws.headers(), **MCP_HEADERS}, json=INITIALIZE)
            assert answer.status_code == 200, answer.text
        assert round_trips.since() == ROUNDS
        # A request without a credential reserves nothing: one too.
        for _ in range(ROUNDS):
            assert (await client.get("/api/v1/dev/ping/", headers={"Host": ws.host})).status_code == 200
        assert round_trips.since() == ROUNDS


async def test_a_locked_out_address_is_refused_in_one_round_trip_whatever_its_credential(
        settings: Settings, app: object, factory: Factory, redis_url: str, round_trips: RoundTrips) -> None:
    ws = await factory.workspace()
    bad = {"Authorization": "Bearer ck_" + "q" * 40, "Host": ws.host}
    async with limited_app(settings, app, redis_url=redis_url, lockout_failures=2) as limited, \
            client_for(limited) as client:
        assert [(await client.get("/api/v1/dev/me/", headers=bad)).status_code for _ in range(2)] == [401, 401]
        round_trips.since()
        for headers in (ws.headers(), bad, {"Host": ws.host}):
            refused = await client.get("/api/v1/dev/me/", headers=headers)
            assert refused.status_code == 429 and refused.json()["error"] == "too_many_failed_attempts"
            assert round_trips.since() == 1


async def test_checks_of_concurrent_requests_share_round_trips_and_count_exactly(
        redis_url: str, round_trips: RoundTrips) -> None:
    limiter = RateLimiter({**CEILINGS, "mcp": 50}, RedisBackend(redis_url))
    try:
        await limiter.hit("mcp", "warm-up")  # loads the script
        round_trips.since()
        verdicts = await asyncio.gather(*(limiter.hit("mcp", "tenant-a", "192.0.2.7") for _ in range(64)))
        served = round_trips.since()
    finally:
        await limiter.close()
    # Every hit counted once, in some order: 50 allowed with distinct remainders, then refusals.
    assert sum(v.allowed for v in verdicts) == 50
    assert sorted(v.remaining for v in verdicts if v.allowed) == list(range(50))
    assert served <= 4, served  # one pipeline for the first hit, one for the rest (a little slack for timing)


async def test_a_check_after_redis_lost_its_scripts_loads_the_script_again_and_counts_once(
        redis_url: str) -> None:
    limiter = RateLimiter(CEILINGS, RedisBackend(redis_url))
    admin = redis.Redis.from_url(redis_url)
    try:
        first = await limiter.hit("authenticated", "user-a")
        admin.script_flush()
        after = await asyncio.gather(*(limiter.hit("authenticated", "user-a") for _ in range(3)))
    finally:
        admin.close()
        await limiter.close()
    assert [first.remaining, *sorted((v.remaining for v in after), reverse=True)] == [
        CEILINGS["authenticated"] - n for n in range(1, 5)]
