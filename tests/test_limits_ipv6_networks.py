"""An IPv6 client is counted by its /64, not by each address: a host holds a whole /64 (SLAAC hands out addresses
from it, privacy extensions rotate them), so limits and the lockout per address would let one machine guess keys
ten at a time from 2^64 addresses. IPv4 addresses, and IPv4 clients seen through IPv6 (mapped, NAT64, 6to4), count
per IPv4 address as before."""

from __future__ import annotations

import uuid

import pytest

from prism.config import Settings
from prism.ratelimit import Locked, RateLimiter
from prism.ratelimit.limiter import Lockout, address_key
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.redis_backend import RedisBackend
from tests.factories import Factory
from tests.limits_support import FakeClock, client_for, limited_app
from tests.test_limits_limiter import CEILINGS, REDIS_URL, redis_available

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}


def network() -> str:
    """A fresh /64 of the documentation prefix, as its first four groups."""
    return f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def test_an_ipv6_address_counts_as_its_64_and_ipv4_as_itself() -> None:
    assert address_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == address_key("2001:DB8:1:2::1") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") == "2001:db8:1:3::/64"
    assert address_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_key("203.0.113.7") == "203.0.113.7"
    assert address_key("unknown") == "unknown"
    assert address_key("fe80::1%eth0") == "fe80::/64"
    # IPv4 clients seen through IPv6 count as their IPv4 address, not as one /64 shared by all of them.
    assert address_key("64:ff9b::203.0.113.7") == "203.0.113.7"
    assert address_key("64:ff9b::198.51.100.1") == "198.51.100.1"
    assert address_key("2002:cb00:7107:1::1") == address_key("2002:cb00:7107:2::1") == "203.0.113.7"


async def test_ten_failures_from_ten_addresses_of_one_64_lock_the_whole_64_on_the_doors(
        settings: Settings, app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    prefix = network()
    async with limited_app(settings, app) as limited:
        limited.state.rate_limiter.backend.clock = FakeClock()
        bad = {"Authorization": "Bearer ck_" + "x" * 40, "Host": ws.host}
        for i in range(10):
            async with client_for(limited, f"{prefix}::{i + 1:x}") as guesser:
                assert (await guesser.get("/api/v1/dev/me/", headers=bad)).status_code == 401
        async with client_for(limited, f"{prefix}:ffff:ffff:ffff:ffff") as same_host, \
                client_for(limited, f"{network()}::1") as neighbour:
            blocked = await same_host.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))
            assert blocked.status_code == 429 and blocked.json()["error"] == "too_many_failed_attempts", blocked.text
            # The refusal names the address that asked, not the network it was counted in.
            assert f"{prefix}:ffff:ffff:ffff:ffff" in blocked.json()["message"]
            assert (await neighbour.post(TOOL, json=LIST_PARTS, headers=ws.headers("member"))).status_code == 200


async def test_the_anonymous_ceiling_is_one_per_64(settings: Settings, app: object) -> None:
    prefix = network()
    async with limited_app(settings, app, rate_limit_anonymous=3) as limited:
        statuses = []
        for i in range(4):
            async with client_for(limited, f"{prefix}::{i + 1:x}") as client:
                statuses.append((await client.get("/api/v1/dev/ping/")).status_code)
        assert statuses == [200, 200, 200, 429]


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_the_lockout_of_a_64_is_shared_by_its_addresses_on_both_storages(backend: str) -> None:
    if backend == "redis" and not redis_available():
        pytest.skip("no Redis on 127.0.0.1:6379")
    storage = MemoryBackend(FakeClock()) if backend == "memory" else RedisBackend(REDIS_URL)
    limiter = RateLimiter(CEILINGS, storage, lockout=Lockout(3, 60, 30))
    prefix = network()
    try:
        assert await limiter.auth_failed(f"{prefix}::1") is False
        assert await limiter.auth_failed(f"{prefix}::2") is False
        assert await limiter.auth_failed(f"{prefix}:1::3") is True
        assert isinstance(await limiter.locked_out(f"{prefix}::9"), Locked)
        assert isinstance(await limiter.hit("authenticated", uuid.uuid4().hex, f"{prefix}::a"), Locked)
        assert await limiter.locked_out(f"{network()}::1") is None
    finally:
        await limiter.close()
