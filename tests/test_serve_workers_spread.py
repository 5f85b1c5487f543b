"""`prism serve --workers 2`: connections opened together are spread over both workers, each serving on a socket of
its own on the port; a worker started again after a crash serves on the server's socket."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.processes import Server, ServerPool, clean_env, postgres_test_url, scratch_database

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {"page_size": 1}}
BURST = 32

pytestmark = pytest.mark.skipif(postgres_test_url() is None, reason="several workers need PostgreSQL")


def served_by(stdout: str) -> list[int]:
    """The worker pid of every governed call in the access log, in order."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"ts"')]
    return [line["pid"] for line in lines if line["logger"] == "prism.access" and line["path"] == TOOL]


async def burst(server: Server, key: str) -> None:
    """BURST connections opened at once, one call on each, as a load generator or a balancer's pool opens them."""
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
    async with httpx.AsyncClient(base_url=server.base_url, limits=limits, headers={
            "Authorization": f"Bearer {key}", "Host": "demo.localhost"}) as client:
        answers = await asyncio.gather(*(client.post(TOOL, json=LIST_PARTS) for _ in range(BURST)))
    assert [a.status_code for a in answers] == [200] * BURST


def wait_for_calls(server: Server, count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while len(pids := served_by(server.stdout)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def test_connections_opened_together_are_spread_over_the_workers(tmp_path: Path, server_pool: ServerPool) -> None:
    with scratch_database(tmp_path, "spread") as url:
        server = server_pool.start("--workers", "2", "--json", ready=False,
                                   env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true",
                                                 PRISM_RATE_LIMIT_PER_PROCESS="true"))
        server.wait_ready(timeout=120)
        key = server.banner_json(timeout=120)["api_key"]
        for round_ in range(5):
            before = len(served_by(server.stdout))
            asyncio.run(burst(server, key))
            shares = Counter(wait_for_calls(server, before + BURST)[before:])
            # Spread by the connections' addresses: each worker's share is about half; on one shared socket a burst
            # went almost whole to whichever worker accepted first (28-32 of 32).
            assert len(shares) == 2 and min(shares.values()) >= 6, (round_, shares, server.describe())
        workers = set(served_by(server.stdout))

        # A worker that dies is started again by the supervisor, and serves on the server's socket.
        victim = max(workers)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            before = len(served_by(server.stdout))
            asyncio.run(burst(server, key))
            if set(wait_for_calls(server, before + BURST)[before:]) - workers:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"no worker served after one was killed:\n{server.describe()}")
        assert server.stop() == 0, server.describe()
