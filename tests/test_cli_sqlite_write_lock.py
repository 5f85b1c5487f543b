"""Commands that only read never take SQLite's write lock (a server's long write does not hold them up), and a
command that must write while another process holds the lock past the busy timeout says the database is busy, not
that it may need migrating."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.processes import run_cli, scratch_database
from tests.test_cli import cli_json

pytestmark = pytest.mark.engine_independent  # SQLite's one write lock


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[str]:
    """A migrated SQLite database whose write lock another connection holds."""
    with scratch_database(tmp_path, "locked") as url:
        cli_json("migrate", database_url=url)
        cli_json("tenant", "create", "acme", "--name", "Acme", "--admin-email", "a@acme.test", "--admin-password",
                 "a long enough password", database_url=url)
        holder = sqlite3.connect(str(make_url(url).database), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield url
        finally:
            holder.execute("ROLLBACK")
            holder.close()


def test_reads_answer_while_a_writer_holds_the_lock_and_a_write_is_told_the_database_is_busy(locked: str) -> None:
    for command in (("org", "list", "--tenant", "acme"), ("persona", "list", "--tenant", "acme"),
                    ("user", "list", "--tenant", "acme")):
        read = run_cli(*command, "--json", database_url=locked, PRISM_DATABASE_BUSY_TIMEOUT_SECONDS="1")
        assert read.returncode == 0, str(read)
    write = run_cli("org", "create", "Second", "--tenant", "acme", "--json", database_url=locked,
                    PRISM_DATABASE_BUSY_TIMEOUT_SECONDS="1")
    assert write.returncode == 1 and write.error["error"] == "database_unavailable", str(write)
    assert "migrate" not in write.error["message"]
