"""`prism serve` and its database as processes: another process holding SQLite's write lock holds up only the
writers (which answer 503 once the busy timeout passes), and `--workers N` runs on PostgreSQL only, with Redis
for the workers' shared rate-limit counters unless per-process limits are accepted."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.processes import (
    TRACEBACK,
    ServerPool,
    clean_env,
    cli_json,
    free_port,
    postgres_test_url,
    run_cli,
    scratch_database,
)
from tests.test_limits_limiter import REDIS_URL, redis_available

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
# Reads the database (a SELECT 1, the oldest waiting delivery) and writes nothing, where any governed call writes
# its ledger entry (the webhook API included).
READINESS = "/readyz"
BUSY_TIMEOUT_SECONDS = 3


class WriteLockHolder:
    """Another process inside `BEGIN IMMEDIATE` on the SQLite file until `release()`."""

    SCRIPT = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
              "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.readline(); c.execute('ROLLBACK')")

    def __init__(self, path: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", self.SCRIPT, path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
            self.proc.stdout.close()


async def _timed_get(client: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None,
                     ) -> tuple[float, httpx.Response]:
    started = time.monotonic()
    response = await client.get(url, headers=headers)
    return time.monotonic() - started, response


@pytest.mark.engine_independent
async def test_while_another_process_holds_the_sqlite_write_lock_only_writers_wait(
        server_pool: ServerPool, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'prism.db'}"
    server = server_pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true",
                                                       PRISM_DATABASE_BUSY_TIMEOUT_SECONDS=str(BUSY_TIMEOUT_SECONDS)))
    key = server.banner_json()["api_key"]
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        assert (await client.post(TOOL, json=LIST_PARTS, headers=auth)).status_code == 200
        assert (await client.get(READINESS)).status_code == 200
        holder = WriteLockHolder(make_url(url).database or "")
        try:
            writer = asyncio.create_task(client.post(TOOL, json=LIST_PARTS, headers=auth))  # waits for the lock
            await asyncio.sleep(0.3)
            assert not writer.done()
            pings = [await _timed_get(client, "/api/v1/dev/ping/") for _ in range(5)]
            read_time, read = await _timed_get(client, READINESS)
            written = await writer
        finally:
            holder.release()
        assert all(r.status_code == 200 for _, r in pings) and read.status_code == 200, read.text
        assert max(t for t, _ in pings) < 0.2, [round(t, 3) for t, _ in pings]
        assert read_time < 0.5, read_time
        assert written.status_code == 503, written.text
        assert written.json()["error"] == "database_unavailable" and written.headers["retry-after"] == "2"
        assert written.json()["success"] is False  # the canonical door's own envelope
        assert (await client.post(TOOL, json=LIST_PARTS, headers=auth)).status_code == 200  # lock gone: writes again
    assert TRACEBACK not in server.stderr, server.stderr
    server.stop()
    verified = cli_json("audit", "verify", "--tenant", "demo", database_url=url)
    assert verified["valid"] is True, verified


@pytest.mark.engine_independent
def test_serve_with_several_workers_on_sqlite_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    done = run_cli("serve", "--workers", "2", "--port", "1", database_url=f"sqlite:///{tmp_path / 'prism.db'}",
                   cwd=tmp_path)
    assert done.returncode == 2, str(done)
    assert "--workers 2 needs PostgreSQL" in done.stderr and TRACEBACK not in done.stderr, str(done)
    assert not (tmp_path / "prism.db").exists()  # refused before anything was created


@pytest.mark.engine_independent
@pytest.mark.parametrize("as_json", [False, True])
def test_serve_with_several_workers_without_redis_is_refused_unless_per_process_limits_are_accepted(
        tmp_path: Path, as_json: bool) -> None:
    """Each worker would count on its own: every ceiling and the lockout threshold twice their settings. Refused
    before the database is touched (this one does not even answer), like SQLite with several workers."""
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/prism"
    done = run_cli("serve", "--workers", "2", "--port", "1", *(["--json"] if as_json else []), database_url=nowhere,
                   cwd=tmp_path)
    assert done.returncode == 2, str(done)
    assert TRACEBACK not in done.stderr and done.stdout == "", str(done)
    if as_json:
        assert json.loads(done.stderr)["error"] == "per_process_limits", str(done)
    assert "PRISM_REDIS_URL" in done.stderr and "PRISM_RATE_LIMIT_PER_PROCESS=true" in done.stderr, str(done)
    # Accepted: the start goes on to the database check (which this server fails, after the refusal would have).
    accepted = run_cli("serve", "--workers", "2", "--port", "1", database_url=nowhere, cwd=tmp_path,
                       PRISM_RATE_LIMIT_PER_PROCESS="true")
    assert accepted.returncode == 1 and "PRISM_RATE_LIMIT_PER_PROCESS" not in accepted.stderr, str(accepted)


@pytest.mark.skipif(postgres_test_url() is None, reason="several workers need PostgreSQL")
@pytest.mark.skipif(not redis_available(), reason="no Redis on 127.0.0.1:6379")
def test_serve_with_several_workers_on_postgresql_seeds_once_and_serves(
        server_pool: ServerPool, tmp_path: Path) -> None:
    """With Redis, which the workers share their counters through (no opt-in needed)."""
    with scratch_database(tmp_path, "workers") as url:
        server = server_pool.start("--json", "--workers", "2", "--seed-demo", ready=False,
                                   env=clean_env(PRISM_DATABASE_URL=url, PRISM_REDIS_URL=REDIS_URL), cwd=tmp_path)
        server.wait_ready(timeout=120)  # two workers start their apps at once: slow on a busy 2-core machine
        banner = server.banner_json()
        assert banner["seeded"] is True
        auth = {"Authorization": f"Bearer {banner['api_key']}"}
        answers = [httpx.post(server.base_url + TOOL, json=LIST_PARTS, headers=auth, timeout=30) for _ in range(6)]
        assert [a.status_code for a in answers] == [200] * 6
        server.stop()
        assert cli_json("audit", "verify", "--tenant", "demo", database_url=url)["valid"] is True
