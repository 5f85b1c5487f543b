"""`prism serve --workers N` without Redis, per-process limits accepted (PRISM_RATE_LIMIT_PER_PROCESS=true): the
start-up says in one WARNING line of the log that every ceiling and the lockout are counted per process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.processes import free_port, run_cli

WARNING = "rate limits and the lockout are counted per process"


def _warnings(stdout: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("level") == "warning" and WARNING in str(line.get("message"))]


@pytest.mark.engine_independent
def test_accepted_per_process_limits_are_warned_about_once_at_start_up(tmp_path: Path) -> None:
    # A database that does not answer: the start goes as far as its check, after the warning, and stops there.
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/prism"
    accepted = run_cli("serve", "--workers", "3", "--port", "1", database_url=nowhere, cwd=tmp_path,
                       PRISM_RATE_LIMIT_PER_PROCESS="true", PRISM_LOG_FORMAT="json")
    assert accepted.returncode == 1, str(accepted)
    [warning] = _warnings(accepted.stdout)
    assert warning["logger"] == "prism.ratelimit" and "--workers 3" in str(warning["message"]), warning


@pytest.mark.engine_independent
def test_one_worker_or_shared_counters_are_not_warned_about(tmp_path: Path) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/prism"
    for workers, settings in (("1", {}), ("2", {"PRISM_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})):
        done = run_cli("serve", "--workers", workers, "--port", "1", database_url=nowhere, cwd=tmp_path,
                       PRISM_RATE_LIMIT_PER_PROCESS="true", PRISM_LOG_FORMAT="json", **settings)
        assert done.returncode != 0 and _warnings(done.stdout) == [], str(done)
