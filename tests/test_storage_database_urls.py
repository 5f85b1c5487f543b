"""Database URLs as operators have them: libpq's `sslmode` (what managed PostgreSQL services hand out) works, and
a database Prism does not run on is refused by name."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from prism.storage.engines import normalize_url, one_shot_engine
from tests.processes import TRACEBACK, postgres_test_url, run_cli


def test_sslmode_is_asyncpgs_ssl() -> None:
    url = make_url(normalize_url("postgresql://user:pw@db.example.com/prism?sslmode=verify-full&application_name=x"))
    assert url.drivername == "postgresql+asyncpg" and dict(url.query) == {"ssl": "verify-full", "application_name": "x"}
    kept = make_url(normalize_url("postgresql://db.example.com/prism?ssl=require&sslmode=disable"))
    assert kept.query["ssl"] == "require"  # asyncpg's own parameter, when given, is the one taken


async def test_a_url_with_sslmode_connects() -> None:
    base = postgres_test_url()
    if base is None:
        pytest.skip("PostgreSQL runs in the PostgreSQL suite")
    engine = one_shot_engine(normalize_url(base + ("&" if "?" in base else "?") + "sslmode=disable"))
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()


@pytest.mark.engine_independent
def test_a_database_prism_does_not_run_on_is_refused_by_name() -> None:
    result = run_cli("org", "list", "--tenant", "acme", "--json", database_url="mysql://root@127.0.0.1/prism")
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    assert result.error["error"] == "invalid_setting" and "mysql" in result.error["message"], str(result)
