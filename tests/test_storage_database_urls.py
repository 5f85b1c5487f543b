"""Database URLs as operators have them: libpq's `sslmode` (what managed PostgreSQL services hand out) works, and
a database Prism does not run on is refused by name."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy import text

from prism.storage import Database
from prism.storage.engines import StorageOptions, normalize_url, one_shot_engine, postgres_connection
from tests.processes import TRACEBACK, postgres_test_url, run_cli


def test_libpq_parameters_travel_in_a_connection_string_of_their_own() -> None:
    url, connect_args = postgres_connection(
        "postgresql://user:pw@db.example.com/prism?sslmode=verify-full&sslrootcert=/etc/ca.pem"
        "&application_name=prism%20api&connect_timeout=7&prepared_statement_cache_size=0")
    assert url.drivername == "postgresql+asyncpg" and url.host == "db.example.com" and url.password == "pw"
    assert dict(url.query) == {"prepared_statement_cache_size": "0"}  # asyncpg's own keyword, as it is
    assert connect_args["timeout"] == 7.0 and connect_args["dsn"].startswith("postgresql://?")
    assert parse_qs(urlsplit(connect_args["dsn"]).query, strict_parsing=True) == {  # as asyncpg reads it
        "sslmode": ["verify-full"], "sslrootcert": ["/etc/ca.pem"], "application_name": ["prism api"]}
    kept, _ = postgres_connection("postgresql://db.example.com/prism?ssl=require&sslmode=disable")
    assert kept.query["ssl"] == "require"  # asyncpg's own parameter, when given, wins over the libpq one (asyncpg)
    for refused in ("options=-c%20x%3Dy", "connect_timeout=0", "connect_timeout=-1", "connect_timeout=inf"):
        with pytest.raises(ValueError, match=refused.split("=")[0]):
            postgres_connection(f"postgresql://db.example.com/prism?{refused}")


def _with(base: str, parameters: str) -> str:
    return base + ("&" if "?" in base else "?") + parameters


async def test_a_url_with_sslmode_connects() -> None:
    base = postgres_test_url()
    if base is None:
        pytest.skip("PostgreSQL runs in the PostgreSQL suite")
    engine = one_shot_engine(normalize_url(_with(base, "sslmode=disable")))
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()


async def test_a_managed_services_url_reaches_postgresql_with_its_libpq_parameters() -> None:
    """`application_name` and `connect_timeout` (as managed services hand them out) made every connection fail
    with a TypeError: they now reach PostgreSQL, on the serving engine as on the one-shot one."""
    base = postgres_test_url()
    if base is None:
        pytest.skip("PostgreSQL runs in the PostgreSQL suite")
    url = _with(base, "sslmode=disable&application_name=prism-api-7&connect_timeout=5")
    database = Database(url, StorageOptions(pool_size=1, max_overflow=0, pool_timeout_seconds=5,
                                            busy_timeout_seconds=5))
    try:
        async with database.read() as session:
            assert (await session.execute(text("SHOW application_name"))).scalar() == "prism-api-7"
    finally:
        await database.dispose()
    engine = one_shot_engine(url)
    try:
        async with engine.connect() as connection:
            assert (await connection.execute(text("SHOW application_name"))).scalar() == "prism-api-7"
    finally:
        await engine.dispose()


def test_a_missing_certificate_authority_file_is_named_without_a_traceback() -> None:
    base = postgres_test_url()
    if base is None:
        pytest.skip("PostgreSQL runs in the PostgreSQL suite")
    url = _with(base, "sslmode=verify-full&sslrootcert=/nonexistent/prism-ca.pem")
    result = run_cli("org", "list", "--tenant", "acme", "--json", database_url=url)
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    assert result.error["error"] == "invalid_setting", str(result)
    assert "sslrootcert=/nonexistent/prism-ca.pem" in result.error["message"], str(result)


@pytest.mark.engine_independent
def test_a_database_prism_does_not_run_on_is_refused_by_name() -> None:
    result = run_cli("org", "list", "--tenant", "acme", "--json", database_url="mysql://root@127.0.0.1/prism")
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    assert result.error["error"] == "invalid_setting" and "mysql" in result.error["message"], str(result)
