"""PostgreSQL URLs with several hosts, a Unix socket or a port out of range: the forms the driver reads connect,
and the others are one `invalid_setting` line naming PRISM_DATABASE_URL, from every command, `serve` included."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.processes import TRACEBACK, cli_json, postgres_test_url, run_cli, scratch_database

REFUSED = {
    "postgresql://prism@db1.example:5432,db2.example:5432/prism": "?host=h1:5432&host=h2:5432",  # libpq's form
    "postgresql://prism@db.example:abc/prism": "port",
    "postgresql://prism@127.0.0.1:99999/prism": "99999",
    "postgresql://prism@127.0.0.1:0/prism": "port 0",
    "postgresql://prism@/prism?host=db1.example:5432&host=db2.example:70000": "70000",
    "postgresql://prism@/prism?host=db1.example:5432&host=db2.example": "ports",
}


SERVE = ("serve", "--host", "127.0.0.1", "--port", "0", "--workers", "2")  # the URL checked before --workers reads it


@pytest.mark.engine_independent  # refused before any database is reached
@pytest.mark.parametrize(("url", "command"), [
    *((url, ("tenant", "list")) for url in REFUSED),
    *((url, command) for url in list(REFUSED)[:3] for command in (("migrate",), SERVE))])
def test_a_url_the_driver_cannot_use_is_one_line(tmp_path: Path, url: str, command: tuple[str, ...]) -> None:
    result = run_cli(*command, "--json", database_url=url, cwd=tmp_path, timeout=120)
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    assert result.error["error"] == "invalid_setting", str(result)
    assert "PRISM_DATABASE_URL" in result.error["message"] and REFUSED[url] in result.error["message"], str(result)


def _hosts_in_the_query(base: str, hosts: str) -> str:
    parsed = make_url(base)
    return parsed.set(host=None, port=None).render_as_string(hide_password=False) + f"?host={hosts}"


def test_hosts_given_in_the_query_connect(tmp_path: Path) -> None:
    """SQLAlchemy's multi-host form and a Unix socket's directory reach PostgreSQL, from `migrate` to a command."""
    if postgres_test_url() is None:
        pytest.skip("PostgreSQL runs in the PostgreSQL suite")
    with scratch_database(tmp_path, "hosts") as url:
        parsed = make_url(url)
        where = f"{parsed.host}:{parsed.port or 5432}"
        cli_json("migrate", database_url=_hosts_in_the_query(url, where))
        # Two hosts: the first one does not answer (a closed port), asyncpg goes on to the next.
        both = _hosts_in_the_query(url, f"127.0.0.1:1&host={where}")
        cli_json("tenant", "create", "acme", "--name", "Acme", "--admin-email", "owner@acme.example",
                 "--admin-password", "a long enough password", database_url=both)
        assert [t["subdomain"] for t in cli_json("tenant", "list", database_url=both)["tenants"]] == ["acme"]
        socket_dir = Path("/var/run/postgresql")
        if not (socket_dir / f".s.PGSQL.{parsed.port or 5432}").exists():
            pytest.skip("no PostgreSQL Unix socket on this machine")
        over_socket = _hosts_in_the_query(url, str(socket_dir))
        assert [t["subdomain"] for t in cli_json("tenant", "list", database_url=over_socket)["tenants"]] == ["acme"]
