"""Two `prism serve` processes sharing one Redis hold ONE ceiling and ONE lockout between them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.processes import Server, ServerPool, clean_env, scratch_database
from tests.test_limits_limiter import REDIS_URL, needs_redis

pytestmark = needs_redis
CEILING = 20


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    log_dir = tmp_path_factory.mktemp("limits-redis")
    with scratch_database(log_dir, "limits") as url:
        pool = ServerPool(log_dir)
        # 127.0.0.1 is a trusted proxy here, so each test sends its own fresh client address in
        # X-Forwarded-For and never meets counters left in the shared Redis by an earlier run.
        env = clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false", PRISM_REDIS_URL=REDIS_URL,
                        PRISM_TRUSTED_PROXIES="127.0.0.1", PRISM_RATE_LIMIT_ANONYMOUS=str(CEILING))
        try:
            yield [pool.start("--json", env=env), pool.start("--json", env=env)]
        finally:
            pool.stop_all()


def fresh_address() -> str:
    return f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"  # a fresh /64: IPv6 counts per /64


async def test_two_processes_hold_one_anonymous_ceiling_under_concurrent_load(servers: list[Server]) -> None:
    address = fresh_address()
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=60)) as client:
        responses = await asyncio.gather(*(
            client.get(servers[i % 2].base_url + "/api/v1/dev/ping/", headers={"X-Forwarded-For": address})
            for i in range(3 * CEILING)))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == CEILING and statuses.count(429) == 2 * CEILING
    assert all(1 <= int(r.headers["Retry-After"]) <= 60 for r in responses if r.status_code == 429)


async def test_a_lockout_earned_on_one_process_holds_on_the_other(servers: list[Server]) -> None:
    address = fresh_address()
    headers = {"X-Forwarded-For": address, "Authorization": "Bearer ck_" + "z" * 40}
    async with httpx.AsyncClient() as client:
        for i in range(10):
            failed = await client.get(servers[i % 2].base_url + "/api/v1/dev/me/", headers=headers)
            assert failed.status_code == 401, failed.text
        for server in servers:
            blocked = await client.get(server.base_url + "/api/v1/dev/ping/", headers={"X-Forwarded-For": address})
            assert blocked.status_code == 429 and blocked.json()["error"] == "too_many_failed_attempts"
            assert 295 <= int(blocked.headers["Retry-After"]) <= 300
        assert (await client.get(servers[0].base_url + "/api/v1/dev/ping/",
                                 headers={"X-Forwarded-For": fresh_address()})).status_code == 200
