"""The suite changes only databases it created itself.

PRISM_TEST_DATABASE_URL names a PostgreSQL server; a developer's own database there (often the one in the URL,
named `test`) must come out of a test run exactly as it went in, and the suite's own database must be gone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import clean_env, postgres_test_url, query, scratch_database

ROOT = Path(__file__).resolve().parent.parent


def _databases(url: str) -> set[str]:
    return {r["datname"] for r in query(url, "SELECT datname FROM pg_database")}


def test_a_run_of_the_suite_leaves_the_developers_database_and_no_database_of_its_own(tmp_path: Path) -> None:
    if postgres_test_url() is None:
        pytest.skip("needs PostgreSQL (PRISM_TEST_DATABASE_URL)")
    with scratch_database(tmp_path, "developer") as mine:
        query(mine, "CREATE TABLE keep_me (note text)")
        query(mine, "INSERT INTO keep_me VALUES ('precious')")
        before = _databases(mine)
        run = subprocess.run(  # a real run of a small part of the suite, pointed at the developer's database
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_smoke.py"],
            cwd=ROOT, env=clean_env(PRISM_TEST_DATABASE_URL=mine), capture_output=True, text=True, timeout=300,
            check=False)
        assert run.returncode == 0, run.stdout + run.stderr
        assert query(mine, "SELECT note FROM keep_me") == [{"note": "precious"}]
        assert _databases(mine) == before
