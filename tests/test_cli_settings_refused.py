"""Settings and arguments a command cannot work with are one clear line (and its exit code), never a traceback or
a value taken silently: a master secret too short, settings out of range, a port that is no port, and `prism audit
seal` pointed nowhere (it creates no `prism.db`, as no command but `serve` and `migrate` does)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prism.config import Settings
from tests.processes import TRACEBACK, CliResult, run_cli, scratch_database
from tests.test_cli import cli_json

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
pytestmark = pytest.mark.engine_independent  # the settings are read before any database is


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with scratch_database(tmp_path_factory.mktemp("settings"), "settings") as url:
        cli_json("migrate", database_url=url)
        yield url


def _refused(result: CliResult, code: str, naming: str) -> None:
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    assert result.error["error"] == code and naming in result.error["message"], str(result)


@pytest.mark.parametrize(("setting", "value"), [
    ("PRISM_RATE_LIMIT_ANONYMOUS", "-1"), ("PRISM_MCP_TOOLS_PAGE_SIZE", "0"), ("PRISM_PUBLIC_PORT", "-5"),
    ("PRISM_PUBLIC_SCHEME", "ftp"), ("PRISM_DATABASE_BUSY_TIMEOUT_SECONDS", "inf"),
    ("PRISM_TRUSTED_PROXIES", "garbage"), ("PRISM_WEBHOOK_CA_BUNDLE", "/nonexistent/ca.pem"),
    ("PRISM_MCP_SSE_KEEPALIVE_SECONDS", "0"), ("PRISM_MCP_SESSION_TTL_SECONDS", "0"),
    ("PRISM_LOCKOUT_FAILURES", "0"), ("PRISM_LOCKOUT_WINDOW_SECONDS", "0"), ("PRISM_LOCKOUT_SECONDS", "inf")])
def test_a_setting_out_of_range_is_refused(migrated: str, setting: str, value: str) -> None:
    _refused(run_cli("org", "list", "--tenant", "acme", "--json", database_url=migrated, **{setting: value}),
             "invalid_setting", setting)


def test_a_master_secret_too_short_is_refused_before_the_command_works(migrated: str) -> None:
    for command in (("migrate",), ("org", "list", "--tenant", "acme")):
        _refused(run_cli(*command, "--json", database_url=migrated, PRISM_SECRET_KEY="short"),
                 "invalid_setting", "PRISM_SECRET_KEY")


def test_a_secret_file_that_cannot_be_created_is_named(migrated: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "secret.key"
    _refused(run_cli("migrate", "--json", database_url=migrated, PRISM_SECRET_KEY_FILE=str(missing)),
             "invalid_setting", "PRISM_SECRET_KEY_FILE")
    # A command that does not create it names the file it looked for.
    _refused(run_cli("audit", "seal", "--json", database_url=migrated, PRISM_SECRET_KEY_FILE=str(missing)),
             "invalid_setting", str(missing))


def test_audit_seal_pointed_nowhere_creates_no_database(tmp_path: Path) -> None:
    result = run_cli("audit", "seal", "--json", database_url=None, cwd=tmp_path)
    _refused(result, "database_not_found", "prism.db")
    assert not (tmp_path / "prism.db").exists()


def test_a_port_that_is_no_port_is_a_usage_error() -> None:
    result = run_cli("serve", "--port", "70000", database_url=None)
    assert result.returncode == 2 and TRACEBACK not in result.stderr and "65535" in result.stderr, str(result)


def test_the_public_scheme_is_read_in_any_case() -> None:
    assert Settings(database_url="sqlite://", public_scheme="HTTPS").public_scheme == "https"


def test_a_refusal_logged_on_the_way_adds_no_line_to_the_json_error(migrated: str) -> None:
    """A refused outbound target is logged as a security event; the command's stderr stays its one JSON line."""
    cli_json("tenant", "create", "logged", "--name", "Logged", "--admin-email", "logged@example.com",
             "--admin-password", "a long enough password", database_url=migrated)
    cli_json("integration", "import-openapi", str(WAREHOUSE), "--app", "logged", database_url=migrated)
    result = run_cli("integration", "connect", "logged", "--tenant", "logged", "--base-url", "https://localhost",
                     "--json", database_url=migrated)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, str(result)
    assert result.error["error"] == "url_not_allowed", str(result)


def test_an_apps_entry_that_does_not_load_is_refused_by_the_integration_commands(migrated: str) -> None:
    _refused(run_cli("integration", "import-openapi", str(WAREHOUSE), "--app", "apps_checked", "--json",
                     database_url=migrated, PRISM_APPS="nope.mod"), "invalid_setting", "nope.mod")


@pytest.mark.parametrize(("parameter", "named"), [("options=-c%20search_path%3Dx", "options"),
                                                  ("service=prod", "service"), ("connect_timeout=0", "connect_timeout"),
                                                  ("connect_timeout=soon", "connect_timeout")])
def test_a_postgresql_url_with_a_parameter_its_driver_cannot_take_is_refused_by_name(parameter: str,
                                                                                     named: str) -> None:
    """A parameter neither libpq's that asyncpg reads nor asyncpg's own would reach asyncpg as a keyword argument it
    does not take (every connection a TypeError), and libpq's `connect_timeout=0` (wait forever) has no asyncpg
    equivalent: refused before anything connects."""
    url = f"postgresql://postgres@127.0.0.1:5432/prism_never?sslmode=disable&{parameter}"
    _refused(run_cli("org", "list", "--tenant", "acme", "--json", database_url=url), "invalid_setting", named)
