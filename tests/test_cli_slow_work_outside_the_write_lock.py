"""Slow work a command does (hashing a new password, about a third of a second; resolving a connection's hosts,
up to seconds) happens before the write transaction that stores its result: SQLite's write lock held meanwhile
would hold up every writer of a running server (its governed calls)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from prism.cli.main import cli
from prism.config import get_settings
from prism.identity import service as identity
from prism.integrations import service as integrations
from tests.processes import TEST_SECRET_KEY_FILE, scratch_database
from tests.test_cli import cli_json

pytestmark = pytest.mark.engine_independent  # SQLite's one write lock
WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"


def _probing(path: str, seen: list[str], real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, first noting whether another connection could take the write lock at that moment."""
    def probe() -> None:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            seen.append("free")
        except sqlite3.OperationalError:
            seen.append("held")
        finally:
            other.close()

    if real is integrations.check_url:
        async def probed_async(*args: Any, **kwargs: Any) -> Any:
            probe()
            return await real(*args, **kwargs)
        return probed_async

    def probed(*args: Any, **kwargs: Any) -> Any:
        probe()
        return real(*args, **kwargs)
    return probed


def test_passwords_are_hashed_and_hosts_resolved_with_the_write_lock_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with scratch_database(tmp_path, "slow") as url:
        cli_json("migrate", database_url=url)
        path = str(make_url(url).database)
        monkeypatch.setenv("PRISM_DATABASE_URL", url)
        monkeypatch.setenv("PRISM_SECRET_KEY_FILE", str(TEST_SECRET_KEY_FILE))
        hashing: list[str] = []
        resolving: list[str] = []
        monkeypatch.setattr(identity, "hash_password", _probing(path, hashing, identity.hash_password))
        monkeypatch.setattr(integrations, "check_url", _probing(path, resolving, integrations.check_url))
        commands = (["user", "create", "hashing@example.com", "--password", "a long enough password"],
                    ["tenant", "create", "slow", "--name", "Slow", "--admin-email", "owner@example.com",
                     "--admin-password", "a long enough password"],
                    ["integration", "import-openapi", str(WAREHOUSE), "--app", "warehouse"],
                    ["integration", "connect", "warehouse", "--tenant", "slow", "--base-url",
                     "https://93.184.215.14/api"])
        # The commands, run in this process, read the settings once (get_settings): these, not an earlier test's.
        get_settings.cache_clear()
        try:
            for command in commands:
                cli([*command, "--json"], standalone_mode=False)
        finally:
            get_settings.cache_clear()
        assert hashing == ["free", "free"] and resolving and set(resolving) == {"free"}
