"""A new password is hashed before the write transaction that stores it: hashing takes about a third of a second,
and SQLite's write lock held meanwhile would hold up every writer of a running server (its governed calls)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from prism.cli.main import cli
from prism.identity import service
from tests.processes import TEST_SECRET_KEY_FILE, scratch_database
from tests.test_cli import cli_json

pytestmark = pytest.mark.engine_independent  # SQLite's one write lock


def test_user_create_and_tenant_create_hash_the_password_with_the_write_lock_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with scratch_database(tmp_path, "hashing") as url:
        cli_json("migrate", database_url=url)
        path = str(make_url(url).database)
        monkeypatch.setenv("PRISM_DATABASE_URL", url)
        monkeypatch.setenv("PRISM_SECRET_KEY_FILE", str(TEST_SECRET_KEY_FILE))
        lock_when_hashing: list[str] = []
        real = service.hash_password

        def hashing(password: str) -> str:
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("ROLLBACK")
                lock_when_hashing.append("free")
            except sqlite3.OperationalError:
                lock_when_hashing.append("held")
            finally:
                other.close()
            return real(password)

        monkeypatch.setattr(service, "hash_password", hashing)
        for command in (["user", "create", "hashing@example.com", "--password", "a long enough password"],
                        ["tenant", "create", "hashing", "--name", "Hashing", "--admin-email", "owner@example.com",
                         "--admin-password", "a long enough password"]):
            cli([*command, "--json"], standalone_mode=False)
        assert lock_when_hashing == ["free", "free"]
