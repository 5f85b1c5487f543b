"""The limiter itself: fixed windows, verdicts, headers and the lockout, on memory and on a real Redis."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis

from prism.config import Settings
from prism.kit.networks import parse_networks
from prism.ratelimit import TIERS, LimiterUnavailable, Locked, RateLimiter, Verdict
from prism.ratelimit.addresses import AddressResolver
from prism.ratelimit.headers import ratelimit_429_headers, x_ratelimit_headers
from prism.ratelimit.limiter import Backend, Lockout, build_limiter, ceilings_from
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.redis_backend import RedisBackend
from prism.ratelimit.unavailable import OnFailure
from tests.limits_support import FakeClock

REDIS_URL = "redis://127.0.0.1:6379/15"


def redis_available() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


needs_redis = pytest.mark.skipif(not redis_available(), reason="no Redis on 127.0.0.1:6379")
CEILINGS = {"anonymous": 3, "authenticated": 5, "admin": 8, "auth_endpoints": 4, "mcp": 6, "key_registration": 2}


def key() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def memory_limiter(clock: FakeClock) -> RateLimiter:
    return RateLimiter(CEILINGS, MemoryBackend(clock), lockout=Lockout(10, 60, 300))


@pytest.fixture
async def redis_limiter() -> AsyncIterator[RateLimiter]:
    limiter = RateLimiter(CEILINGS, RedisBackend(REDIS_URL), lockout=Lockout(10, 60, 1.0))
    yield limiter
    await limiter.close()


def test_default_ceilings_are_the_spec_table() -> None:
    settings = Settings(database_url="sqlite:///unused.db")
    assert ceilings_from(settings) == {"anonymous": 30, "anonymous_discovery": 600, "authenticated": 300,
                                       "admin": 1000, "auth_endpoints": 200, "mcp": 600, "key_registration": 5,
                                       "integration_changes": 10}
    assert (settings.lockout_failures, settings.lockout_window_seconds, settings.lockout_seconds) == (10, 60, 300)


def test_ceilings_are_configurable_per_tier_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRISM_RATE_LIMIT_AUTHENTICATED", "50000")
    limiter = build_limiter(Settings(database_url="sqlite:///unused.db"))
    assert limiter.ceilings["authenticated"] == 50000 and limiter.ceilings["anonymous"] == 30


def test_unknown_tier_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown rate-limit tiers"):
        RateLimiter({"anonymus": 1}, MemoryBackend())


async def test_memory_window_allows_exactly_the_ceiling_then_refuses_until_it_resets(
        memory_limiter: RateLimiter, clock: FakeClock) -> None:
    user = key()
    verdicts = [await memory_limiter.hit("authenticated", user) for _ in range(5)]
    assert [v.allowed for v in verdicts] == [True] * 5
    assert [v.remaining for v in verdicts] == [4, 3, 2, 1, 0]
    clock.advance(20.5)
    refused = await memory_limiter.hit("authenticated", user)
    assert not refused.allowed and refused.remaining == 0 and refused.limit == 5
    assert refused.reset_after == pytest.approx(39.5) and refused.retry_after == 40
    clock.advance(39.5)
    assert (await memory_limiter.hit("authenticated", user)).allowed


async def test_tiers_and_keys_count_separately(memory_limiter: RateLimiter) -> None:
    a, b = key(), key()
    for _ in range(3):
        assert (await memory_limiter.hit("anonymous", a)).allowed
    assert not (await memory_limiter.hit("anonymous", a)).allowed
    assert (await memory_limiter.hit("anonymous", b)).allowed
    assert (await memory_limiter.hit("authenticated", a)).allowed


async def test_memory_lockout_after_exactly_ten_failures_and_release_after_the_block(
        memory_limiter: RateLimiter, clock: FakeClock) -> None:
    address = "203.0.113.7"
    for _ in range(9):
        assert await memory_limiter.auth_failed(address) is False
    assert await memory_limiter.locked_out(address) is None
    assert await memory_limiter.auth_failed(address) is True
    assert await memory_limiter.locked_out(address) == Locked(pytest.approx(300))
    assert await memory_limiter.locked_out("203.0.113.8") is None
    # A failure while locked is refused with the lockout and not counted.
    assert await memory_limiter.auth_failed(address) == Locked(pytest.approx(300))
    clock.advance(299)
    assert await memory_limiter.locked_out(address) == Locked(pytest.approx(1))
    clock.advance(1)
    assert await memory_limiter.locked_out(address) is None
    # Released with a clean slate: one more failure does not lock again.
    assert await memory_limiter.auth_failed(address) is False


async def test_failures_spread_over_more_than_the_window_do_not_lock(
        memory_limiter: RateLimiter, clock: FakeClock) -> None:
    address = "198.51.100.1"
    for _ in range(9):
        await memory_limiter.auth_failed(address)
    clock.advance(60)
    assert await memory_limiter.auth_failed(address) is False
    assert await memory_limiter.locked_out(address) is None


async def test_memory_sweeps_expired_windows(clock: FakeClock) -> None:
    backend = MemoryBackend(clock)
    for i in range(5000):
        await backend.hit(f"k{i}", 10, 60)
        if i == 2000:
            clock.advance(61)
    assert len(backend._windows) < 5000


def test_headers_of_an_allowed_and_a_refused_verdict() -> None:
    from prism.ratelimit.verdict import verdict_of

    allowed = verdict_of(3, 10, 12.2)
    assert x_ratelimit_headers(allowed) == {"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "7",
                                            "X-RateLimit-Reset": "13"}
    refused = verdict_of(11, 10, 12.2)
    assert ratelimit_429_headers(refused) == {"RateLimit-Limit": "10", "RateLimit-Remaining": "0",
                                              "RateLimit-Reset": "13", "Retry-After": "13"}


async def test_memory_check_costs_a_few_microseconds() -> None:
    limiter = RateLimiter({**CEILINGS, "authenticated": 10**9}, MemoryBackend())
    users = [key() for _ in range(100)]
    rounds, batches = 5000, []
    # The best of several batches: the machine is shared, and other work only ever adds time.
    for _ in range(8):
        start = time.perf_counter()
        for i in range(rounds):
            await limiter.hit("authenticated", users[i % 100])
        batches.append((time.perf_counter() - start) / rounds * 1e6)
    assert min(batches) < 10, f"{min(batches):.2f} µs per check"


def test_forwarded_for_is_believed_only_from_trusted_proxies() -> None:
    resolver = AddressResolver(parse_networks("10.0.0.1, 192.168.0.0/16"))
    assert resolver.resolve("203.0.113.5", ["1.2.3.4"]) == "203.0.113.5"
    assert resolver.resolve("10.0.0.1", ["1.2.3.4"]) == "1.2.3.4"
    # Hops appended by our own proxies are skipped; a spoofed leftmost entry is not believed.
    assert resolver.resolve("10.0.0.1", ["6.6.6.6, 1.2.3.4, 192.168.3.3"]) == "1.2.3.4"
    assert resolver.resolve(None, None) == "unknown"
    assert AddressResolver(()).resolve("10.0.0.1", ["1.2.3.4"]) == "10.0.0.1"
    with pytest.raises(ValueError, match=r"proxy\.example\.com"):
        parse_networks("10.0.0.1, proxy.example.com")


def test_every_forwarded_for_line_counts_in_order() -> None:
    """A client's own line comes first, its proxy's appended line after: the lines are one list (RFC 9110 §5.3)."""
    resolver = AddressResolver(parse_networks("10.0.0.1, 192.168.0.0/16"))
    assert resolver.resolve("10.0.0.1", ["6.6.6.6", "203.0.113.50"]) == "203.0.113.50"
    assert resolver.resolve("10.0.0.1", ["6.6.6.6, 7.7.7.7", "203.0.113.50, 192.168.3.3"]) == "203.0.113.50"


def test_a_hop_with_a_port_or_brackets_names_its_address() -> None:
    resolver = AddressResolver(parse_networks("10.0.0.1, 192.168.0.0/16"))
    assert resolver.resolve("10.0.0.1", ["203.0.113.7:4711"]) == "203.0.113.7"
    assert resolver.resolve("10.0.0.1", ["[2001:db8::7]:4711"]) == "2001:db8::7"
    assert resolver.resolve("10.0.0.1", ["[2001:DB8::7]"]) == "2001:db8::7"
    assert resolver.resolve("10.0.0.1", ["2001:db8::7:4711"]) == "2001:db8::7:4711"  # no brackets: all address
    # A trusted proxy's hop is recognised with its port too.
    assert resolver.resolve("10.0.0.1", ["203.0.113.7:1, 192.168.3.3:443"]) == "203.0.113.7"


@pytest.mark.parametrize("hop", ["unknown", "_hidden", "203.0.113.7:port", "[2001:db8::7", "[2001:db8::7]x",
                                 "[203.0.113.7]", "1.2.3.4:99999999", "2001:db8::7:"])
def test_an_unreadable_hop_is_the_trusted_proxy_that_wrote_it(hop: str) -> None:
    """Nothing is known past an entry that names no address; the proxy that wrote it is the client. No client
    can choose that address, and only the clients behind that one proxy share it."""
    resolver = AddressResolver(parse_networks("10.0.0.1, 192.168.0.0/16"))
    assert resolver.resolve("10.0.0.1", [hop]) == "10.0.0.1"
    assert resolver.resolve("10.0.0.1", [f"6.6.6.6, {hop}, 192.168.3.3"]) == "192.168.3.3"


@needs_redis
async def test_redis_window_allows_exactly_the_ceiling(redis_limiter: RateLimiter) -> None:
    user = key()
    verdicts = [await redis_limiter.hit("authenticated", user) for _ in range(6)]
    assert [v.allowed for v in verdicts] == [True] * 5 + [False]
    assert [v.remaining for v in verdicts] == [4, 3, 2, 1, 0, 0]
    assert 0 < verdicts[-1].reset_after <= 60 and 1 <= verdicts[-1].retry_after <= 60


@needs_redis
async def test_redis_holds_the_ceiling_under_concurrent_load_from_two_clients() -> None:
    # Two backends = two connection pools, as two Prism processes would have.
    first = RateLimiter({**CEILINGS, "mcp": 50}, RedisBackend(REDIS_URL))
    second = RateLimiter({**CEILINGS, "mcp": 50}, RedisBackend(REDIS_URL))
    tenant = key()
    try:
        verdicts = await asyncio.gather(*(limiter.hit("mcp", tenant) for limiter in [first, second] * 60))
    finally:
        await first.close()
        await second.close()
    assert sum(v.allowed for v in verdicts) == 50


async def test_memory_holds_the_ceiling_under_concurrent_load(memory_limiter: RateLimiter) -> None:
    tenant = key()
    verdicts = await asyncio.gather(*(memory_limiter.hit("mcp", tenant) for _ in range(100)))
    assert sum(v.allowed for v in verdicts) == CEILINGS["mcp"]


@needs_redis
async def test_redis_lockout_after_ten_failures_is_shared_and_released(redis_limiter: RateLimiter) -> None:
    other = RateLimiter(CEILINGS, RedisBackend(REDIS_URL), lockout=Lockout(10, 60, 1.0))
    address = f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"
    try:
        for i in range(9):
            assert await (redis_limiter if i % 2 else other).auth_failed(address) is False
        assert await other.locked_out(address) is None
        assert await redis_limiter.auth_failed(address) is True
        locked = await other.locked_out(address)
        assert locked is not None and 0 < locked.seconds_left <= 1.0
        assert isinstance(await other.auth_failed(address), Locked)
        await asyncio.sleep(locked.seconds_left + 0.05)
        assert await redis_limiter.locked_out(address) is None
    finally:
        await other.close()


def test_every_tier_of_the_contract_exists() -> None:
    """SPEC.md's tiers, and Prism's own `integration_changes` (docs/limits.md)."""
    assert set(TIERS) == {"anonymous", "anonymous_discovery", "authenticated", "admin", "auth_endpoints", "mcp",
                          "key_registration", "integration_changes"}


@pytest.mark.parametrize("on_failure", ["open", "closed"])
async def test_an_unreachable_redis_raises_limiter_unavailable_and_warns_once(
        caplog: pytest.LogCaptureFixture, on_failure: OnFailure) -> None:
    """The storage never answers "allowed" for counters it could not reach; the edge decides what that means.
    Only auth_failed (called by endpoints after checking a password) applies the setting itself."""
    from tests.processes import free_port

    limiter = RateLimiter(CEILINGS, RedisBackend(f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"),
                          on_failure=on_failure)
    try:
        with caplog.at_level("WARNING", logger="prism.ratelimit"):
            for _ in range(5):
                with pytest.raises(LimiterUnavailable):
                    await limiter.hit("anonymous", key(), "192.0.2.1")
            with pytest.raises(LimiterUnavailable):
                await limiter.locked_out("192.0.2.1")
            if on_failure == "open":
                assert await limiter.auth_failed("192.0.2.1") is False
            else:
                with pytest.raises(LimiterUnavailable):
                    await limiter.auth_failed("192.0.2.1")
    finally:
        await limiter.close()
    complaints = [r for r in caplog.records if "Redis is unreachable" in r.getMessage()]
    assert len(complaints) == 1 and complaints[0].levelname == "WARNING"
    assert "s3cret-pw" not in caplog.text


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_hit_naming_a_locked_address_is_refused_and_not_counted(backend: str, clock: FakeClock) -> None:
    if backend == "redis" and not redis_available():
        pytest.skip("no Redis on 127.0.0.1:6379")
    storage: Backend = MemoryBackend(clock) if backend == "memory" else RedisBackend(REDIS_URL)
    limiter = RateLimiter(CEILINGS, storage, lockout=Lockout(2, 60, 30))
    address, user = f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1", key()
    try:
        assert (await limiter.hit("authenticated", user, address)) == (True, 5, 4, pytest.approx(60, abs=1), 0)
        assert await limiter.auth_failed(address) is False
        assert await limiter.auth_failed(address) is True
        refused = await limiter.hit("authenticated", user, address)
        assert isinstance(refused, Locked) and 29 < refused.seconds_left <= 30
        # Nothing was counted while locked: the same user from elsewhere has 3 left after one more hit.
        other = await limiter.hit("authenticated", user, "192.0.2.200")
        assert isinstance(other, Verdict) and other.remaining == 3
    finally:
        await limiter.close()
