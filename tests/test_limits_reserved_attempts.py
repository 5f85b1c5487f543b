"""The limiter's reserved attempts (prism.edge.lockout counts each secret before checking it), in memory and on
Redis: reserved only while the failures plus the attempts in flight are under the threshold; a failure settles
its attempt and locks at the tenth; a right secret frees its place and never resets the failure count."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import redis

from prism.config import Settings
from prism.ratelimit import RateLimiter
from prism.ratelimit.limiter import Lockout, ceilings_from
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.redis_backend import RedisBackend
from prism.ratelimit.verdict import BUSY, Locked, Verdict
from tests.test_limits_limiter import REDIS_URL, redis_available

CEILINGS = ceilings_from(Settings())


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest) -> AsyncIterator[RateLimiter]:
    if request.param == "redis" and not redis_available():
        pytest.skip("no Redis on 127.0.0.1:6379")
    backend = MemoryBackend() if request.param == "memory" else RedisBackend(REDIS_URL)
    limiter = RateLimiter(CEILINGS, backend, lockout=Lockout(10, 60, 300))
    yield limiter
    await limiter.close()


def _address() -> str:
    return f"198.51.100.{uuid.uuid4().int % 250}-{uuid.uuid4().hex[:6]}"  # unique: no counters of other tests


async def test_at_most_ten_attempts_in_flight_and_a_right_one_frees_only_its_own_place(limiter: RateLimiter) -> None:
    address = _address()
    names = [f"a{i}" for i in range(10)]
    assert [await limiter.reserve_attempt(address, n) for n in names] == [True] * 10
    assert await limiter.reserve_attempt(address, "eleventh") is False  # nothing reserved
    assert await limiter.release_attempt(address, names[0]) is None  # a right secret: its place is free
    assert await limiter.reserve_attempt(address, "eleventh") is True
    for name in names[1:]:
        assert await limiter.auth_failed(address, name) is False
    assert await limiter.reserve_attempt(address, "twelfth") is False  # nine failed, one in flight
    # The success freed a place but did not reset the count: the tenth failure locks.
    assert await limiter.auth_failed(address, "eleventh") is True
    assert isinstance(await limiter.reserve_attempt(address, "after"), Locked)


async def test_a_hit_naming_the_attempt_frees_it(limiter: RateLimiter) -> None:
    address = _address()
    for i in range(10):
        assert await limiter.reserve_attempt(address, f"a{i}") is True
    verdict = await limiter.hit("authenticated", f"user-{address}", address, "a3")
    assert not isinstance(verdict, Locked) and verdict.allowed
    assert await limiter.reserve_attempt(address, "next") is True
    assert await limiter.reserve_attempt(address, "one more") is False


async def test_a_known_secret_is_counted_only_while_a_reservation_would_be_given(limiter: RateLimiter) -> None:
    """`hit_known_secret` (a cached key's request, prism.edge.stack) is a reservation freed at one instant: it holds
    no place, is Busy with nothing counted while the failures plus attempts in flight fill the threshold, and is
    refused Locked once they locked the address."""
    address, user = _address(), f"user-{uuid.uuid4().hex}"
    first = await limiter.hit_known_secret("authenticated", user, address)
    assert isinstance(first, Verdict) and first.remaining == CEILINGS["authenticated"] - 1
    for i in range(9):
        assert await limiter.reserve_attempt(address, f"a{i}") is True
    assert isinstance(await limiter.hit_known_secret("authenticated", user, address), Verdict)  # nine of ten
    assert await limiter.reserve_attempt(address, "a9") is True  # the known secret held no place
    assert await limiter.hit_known_secret("authenticated", user, address) is BUSY
    for i in range(5):
        assert await limiter.auth_failed(address, f"a{i}") is False
    assert await limiter.hit_known_secret("authenticated", user, address) is BUSY  # five failed, five in flight
    assert await limiter.release_attempt(address, "a9") is None
    after = await limiter.hit_known_secret("authenticated", user, address)
    assert isinstance(after, Verdict) and after.remaining == CEILINGS["authenticated"] - 3  # busy counted nothing
    for i in range(5, 9):
        await limiter.auth_failed(address, f"a{i}")
    assert await limiter.auth_failed(address) is True  # the tenth failure
    assert isinstance(await limiter.hit_known_secret("authenticated", user, address), Locked)


async def test_a_failure_on_a_locked_address_is_not_counted_and_frees_its_attempt(limiter: RateLimiter) -> None:
    address = _address()
    for i in range(10):
        assert await limiter.reserve_attempt(address, f"a{i}") is True
    for i in range(9):
        await limiter.auth_failed(address, f"a{i}")
    assert await limiter.auth_failed(address, "a9") is True
    assert isinstance(await limiter.auth_failed(address, "late"), Locked)
    assert isinstance(await limiter.release_attempt(address, "late"), Locked)  # a right one: refused too


@pytest.mark.skipif(not redis_available(), reason="no Redis on 127.0.0.1:6379")
async def test_reservations_survive_redis_losing_its_scripts() -> None:
    """The lockout's scripts go through the same pipelines as the hits: loaded again when Redis lost them."""
    limiter = RateLimiter(CEILINGS, RedisBackend(REDIS_URL), lockout=Lockout(10, 60, 300))
    admin = redis.Redis.from_url(REDIS_URL)
    address = _address()
    try:
        assert await limiter.reserve_attempt(address, "first") is True
        admin.script_flush()
        assert await limiter.auth_failed(address, "first") is False
        assert await limiter.reserve_attempt(address, "second") is True
        assert await limiter.release_attempt(address, "second") is None
    finally:
        admin.close()
        await limiter.close()
