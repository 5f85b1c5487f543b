"""The lockout is atomic: under 48 concurrent failed credentials from one address, exactly `lockout_failures`
are answered 401 and every other one 429, on two `prism serve` processes sharing Redis and on one process
counting in memory."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import Server, ServerPool, clean_env, scratch_database
from tests.test_limits_limiter import REDIS_URL, redis_available

CONCURRENT = 48
FAILURES = 10


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    log_dir = tmp_path_factory.mktemp("limits-atomic")
    with scratch_database(log_dir, "atomic") as url:
        yield log_dir, url


def _start(database: tuple[Path, str], count: int, **settings: str) -> tuple[ServerPool, list[Server]]:
    log_dir, url = database
    # 127.0.0.1 is a trusted proxy: each test sends a fresh client address and meets no earlier counters.
    env = clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false", PRISM_TRUSTED_PROXIES="127.0.0.1",
                    PRISM_WEBHOOK_WORKER_IN_PROCESS="false", **settings)
    pool = ServerPool(log_dir)
    try:
        return pool, [pool.start("--json", env=env) for _ in range(count)]
    except BaseException:
        pool.stop_all()
        raise


async def _concurrent_guesses(servers: list[Server]) -> list[int]:
    address = f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"  # a fresh /64: IPv6 counts per /64
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=CONCURRENT), timeout=30) as client:
        answers = await asyncio.gather(*(
            client.get(servers[i % len(servers)].base_url + "/api/v1/dev/me/", headers={
                "X-Forwarded-For": address, "Authorization": f"Bearer ck_{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"})
            for i in range(CONCURRENT)))
    assert all(a.status_code in (401, 429) for a in answers), [a.text for a in answers if a.status_code >= 500]
    assert all(a.json()["error"] == "too_many_failed_attempts" for a in answers if a.status_code == 429)
    return [a.status_code for a in answers]


@pytest.mark.skipif(not redis_available(), reason="no Redis on 127.0.0.1:6379")
async def test_two_processes_on_redis_answer_exactly_ten_failures_before_the_block(
        database: tuple[Path, str]) -> None:
    pool, servers = _start(database, 2, PRISM_REDIS_URL=REDIS_URL)
    try:
        statuses = await _concurrent_guesses(servers)
    finally:
        pool.stop_all()
    assert statuses.count(401) == FAILURES and statuses.count(429) == CONCURRENT - FAILURES


async def test_one_process_in_memory_answers_exactly_ten_failures_before_the_block(
        database: tuple[Path, str]) -> None:
    pool, servers = _start(database, 1)
    try:
        statuses = await _concurrent_guesses(servers)
    finally:
        pool.stop_all()
    assert statuses.count(401) == FAILURES and statuses.count(429) == CONCURRENT - FAILURES
