"""A real `prism serve` process on the test database, for the clients, the generated client and the fuzzing.

Import the fixture into a conftest or test module (`from tests.live_prism import live_prism_fixture`). The server
shares the session's database, so workspaces built with `factory` are visible to it at once.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from prism.ratelimit.limiter import TIERS
from tests.processes import TRACEBACK, ServerPool, clean_env

# Fuzzing sends thousands of requests: raise the per-user ceilings, keep the limiter running.
GENEROUS_LIMITS = {f"PRISM_RATE_LIMIT_{tier.upper()}": "1000000" for tier in TIERS}


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    pool: ServerPool

    def errors_logged(self) -> list[str]:
        return [s.stderr for s in self.pool.started if TRACEBACK in s.stderr]


@pytest.fixture(scope="session", name="live_prism")
def live_prism_fixture(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    log_dir = tmp_path_factory.mktemp("live-prism")
    pool = ServerPool(log_dir)
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_CREDENTIAL_CACHE_SECONDS="0",
                    PRISM_LOG_LEVEL="warning", PRISM_WEBHOOK_WORKER_IN_PROCESS="false",
                    PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", **GENEROUS_LIMITS)
    try:
        server = pool.start("--workers", "1", env=env, cwd=log_dir)
        yield LiveServer(server.base_url, pool)
    finally:
        pool.stop_all()


async def run_process(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
                      limit_seconds: float = 600) -> subprocess.CompletedProcess[str]:
    """Run a command to completion off the event loop (tests are async; the live server is another process)."""
    return await asyncio.to_thread(subprocess.run, command, cwd=cwd, env=env, capture_output=True, text=True,
                                   timeout=limit_seconds, check=False)
