"""SPEC.md "Limits": ten failed authentications within 60 seconds block the address: within ANY 60 s. The failures are
counted over a sliding window, in memory and on Redis, and every check that reads the count (a reservation, a
cached key's `hit_known_secret`) reads that same sliding count. A fixed window opened by the first failure let
failures straddling its end pass unseen together: one failure, eight just before the window's end, nine just after
(17 within a second) were all answered 401.

Memory runs on a fake clock with the default 60 s window; Redis (a redis-server of the test's own: its clock is
Redis's) on a 1 s window with real sleeps."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from prism.config import Settings
from prism.ratelimit import RateLimiter
from prism.ratelimit.limiter import Lockout, ceilings_from
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.redis_backend import FAILURES, RedisBackend, _auth_key
from prism.ratelimit.verdict import BUSY, Locked, Verdict
from tests.factories import Factory
from tests.limits_support import FakeClock, client_for, limited_app, private_redis

# The limiter alone: no database (the HTTP test at the end runs on both engines).
limiter_only = pytest.mark.engine_independent
CEILINGS = ceilings_from(Settings())
ADDRESS = "203.0.113.77"


@dataclass
class Storage:
    limiter: RateLimiter
    window: float
    # Moves time on by a fraction of the window: the fake clock's, or a real sleep for Redis's own clock.
    later: Callable[[float], Awaitable[None]]
    redis_url: str | None = None


@pytest.fixture(params=["memory", "redis"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    if request.param == "memory":
        clock = FakeClock()

        async def advance(fraction: float) -> None:
            clock.advance(60.0 * fraction)

        limiter = RateLimiter(CEILINGS, MemoryBackend(clock), lockout=Lockout(10, 60.0, 300.0))
        yield Storage(limiter, 60.0, advance)
        await limiter.close()
        return
    if shutil.which("redis-server") is None:
        pytest.skip("no redis-server to start")
    with private_redis(tmp_path) as url:
        limiter = RateLimiter(CEILINGS, RedisBackend(url), lockout=Lockout(10, 1.0, 300.0))

        async def sleep(fraction: float) -> None:
            await asyncio.sleep(1.0 * fraction)

        yield Storage(limiter, 1.0, sleep, url)
        await limiter.close()


async def _fail(limiter: RateLimiter, times: int) -> list[Locked | bool]:
    return [await limiter.auth_failed(ADDRESS) for _ in range(times)]


@limiter_only
async def test_failures_straddling_a_minute_lock_at_the_tenth_within_the_window(storage: Storage) -> None:
    limiter = storage.limiter
    started = time.monotonic()
    assert await _fail(limiter, 1) == [False]
    await storage.later(0.7)
    assert await _fail(limiter, 8) == [False] * 8  # nine within the window
    await storage.later(0.35)  # the first failure has stopped counting; the other eight still count
    outcomes = await _fail(limiter, 9)
    # The ninth and tenth within the window: the tenth locks, and every failure after it is refused as locked.
    assert outcomes[:2] == [False, True], outcomes
    assert all(isinstance(outcome, Locked) for outcome in outcomes[2:]), outcomes
    if storage.redis_url is not None:  # the sleeps above were the window's, not a slow machine's
        assert time.monotonic() - started < 1.0 + 0.7, "too slow to tell the windows apart"


@limiter_only
async def test_each_failure_stops_counting_when_its_own_window_ends(storage: Storage) -> None:
    """Five failures, four more later: when the five have ended the four still count, so five more make nine and
    the next one locks (a fixed window restarted at zero and let six pass)."""
    limiter = storage.limiter
    assert await _fail(limiter, 5) == [False] * 5
    await storage.later(0.5)
    assert await _fail(limiter, 4) == [False] * 4
    await storage.later(0.55)  # the five ended; the four count until half a window from now
    assert await _fail(limiter, 5) == [False] * 5  # nine within the window
    assert await _fail(limiter, 1) == [True]


@limiter_only
async def test_reservations_and_known_secrets_read_the_sliding_count(storage: Storage) -> None:
    """A reservation (an uncached key's check) and a cached key's count take a place only while the failures within
    the window plus the attempts in flight are under the threshold: the same sliding count that locks."""
    limiter = storage.limiter
    assert await _fail(limiter, 1) == [False]
    await storage.later(0.7)
    assert await _fail(limiter, 8) == [False] * 8
    await storage.later(0.35)  # eight failures count: two places are left
    assert [await limiter.reserve_attempt(ADDRESS, f"a{i}") for i in range(3)] == [True, True, False]
    assert await limiter.hit_known_secret("authenticated", "user-1", ADDRESS) is BUSY  # eight failed, two in flight
    assert await limiter.release_attempt(ADDRESS, "a0") is None
    assert isinstance(await limiter.hit_known_secret("authenticated", "user-1", ADDRESS), Verdict)
    await storage.later(0.75)  # the eight ended too: only the attempt in flight holds a place
    assert [await limiter.reserve_attempt(ADDRESS, f"b{i}") for i in range(10)] == [True] * 9 + [False]


@limiter_only
async def test_the_failures_kept_per_address_are_bounded(storage: Storage) -> None:
    """An address failing steadily below the threshold keeps only the failures within the window (on Redis a sorted
    set expiring with its newest failure's window); a sweep drops the addresses whose failures all ended."""
    limiter = storage.limiter
    key = _auth_key(ADDRESS) + FAILURES
    admin = redis.Redis.from_url(storage.redis_url) if storage.redis_url else None
    try:
        for _ in range(12):  # one failure every fifth of the window: never more than five within it
            assert await _fail(limiter, 1) == [False]
            if admin is None:
                assert len(limiter.backend._failures[ADDRESS]) <= 5  # type: ignore[attr-defined]
            else:
                assert admin.zcard(key) <= 5 and 0 < admin.pttl(key) <= 1000
            await storage.later(0.2)
        await storage.later(1.0)
        if admin is None:
            limiter.backend._sweep()  # type: ignore[attr-defined]
            assert ADDRESS not in limiter.backend._failures  # type: ignore[attr-defined]
        else:
            assert admin.exists(key) == 0
    finally:
        if admin is not None:
            admin.close()


async def test_an_address_failing_with_straddled_keys_is_locked_over_http(
        settings: Settings, app: object, factory: Factory) -> None:
    """The review's scenario through the edge: one wrong key, eight just before the minute ends, nine just after.
    The tenth within the minute is answered 401, the rest 429 too_many_failed_attempts."""
    ws = await factory.workspace(roles=("member",))
    clock = FakeClock()
    async with limited_app(settings, app) as limited, client_for(limited, "203.0.113.78") as client:
        limited.state.rate_limiter.backend.clock = clock
        bad = {"Authorization": "Bearer ck_" + "s" * 40, "Host": ws.host}
        assert (await client.get("/api/v1/dev/me/", headers=bad)).status_code == 401
        clock.advance(59.0)
        statuses = [(await client.get("/api/v1/dev/me/", headers=bad)).status_code for _ in range(8)]
        clock.advance(1.5)
        answers = [await client.get("/api/v1/dev/me/", headers=bad) for _ in range(9)]
        statuses += [answer.status_code for answer in answers]
        assert statuses == [401] * 10 + [429] * 7, statuses
        assert answers[-1].json()["error"] == "too_many_failed_attempts"
