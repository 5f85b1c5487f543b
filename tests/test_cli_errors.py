"""Bad settings and missing services: every command says which setting to fix in one line, exits non-zero,
and prints no traceback — as text, or as one JSON line on stderr with --json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.processes import HOST, TRACEBACK, CliResult, free_port, postgres_test_url, run_cli

# Commands as an operator runs them; each needs the database (serve also Redis when set).
COMMANDS = {
    "serve": ["serve", "--host", HOST, "--port", "0"],
    "worker": ["worker"],
    "org list": ["org", "list", "--tenant", "acme"],
    "migrate": ["migrate"],
}


def one_error_line(result: CliResult, *, as_json: bool) -> tuple[str, str]:
    """(code, message) of the single line a refused command prints on stderr."""
    assert result.returncode != 0, str(result)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    assert result.stdout == "", str(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, str(result)
    if as_json:
        body = json.loads(lines[0])
        assert set(body) == {"error", "message"}, body
        return body["error"], body["message"]
    assert lines[0].startswith("error: ") and lines[0].endswith(")"), lines[0]
    message, _, code = lines[0].removeprefix("error: ").rpartition(" (")
    return code.rstrip(")"), message


@pytest.mark.engine_independent
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_setting_that_does_not_parse_is_named(tmp_path: Path, command: str, as_json: bool) -> None:
    args = [*COMMANDS[command], *(["--json"] if as_json else [])]
    result = run_cli(*args, database_url=None, cwd=tmp_path, PRISM_DATABASE_POOL_SIZE="abc")
    code, message = one_error_line(result, as_json=as_json)
    assert code == "invalid_setting" and "PRISM_DATABASE_POOL_SIZE='abc'" in message, message


@pytest.mark.engine_independent
@pytest.mark.parametrize("setting", ["PRISM_WEBHOOK_WORKER_CONCURRENCY", "PRISM_WEBHOOK_LEASE_SECONDS",
                                     "PRISM_WEBHOOK_POLL_SECONDS"])
def test_a_delivery_worker_setting_of_zero_is_refused_by_name(tmp_path: Path, setting: str) -> None:
    """A worker with no slot would run and never deliver; a lease of 0 s means nothing (each lease is at least the
    webhook's timeout plus a margin); a poll of 0 s would spin. Each is refused before the worker starts."""
    result = run_cli(*COMMANDS["worker"], database_url=None, cwd=tmp_path, timeout=30, **{setting: "0"})
    code, message = one_error_line(result, as_json=False)
    assert code == "invalid_setting" and f"{setting}='0'" in message, message


@pytest.mark.engine_independent
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_database_server_that_is_down_is_named(tmp_path: Path, command: str) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/prism"  # nothing listens there
    result = run_cli(*COMMANDS[command], "--json", database_url=url, cwd=tmp_path)
    code, message = one_error_line(result, as_json=True)
    assert code == "database_unreachable" and "PRISM_DATABASE_URL" in message and "127.0.0.1" in message, message


@pytest.mark.skipif(postgres_test_url() is None, reason="a database server to ask for a missing database")
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_database_missing_on_a_running_server_is_named(tmp_path: Path, command: str) -> None:
    from sqlalchemy.engine import make_url

    pg = postgres_test_url() or ""
    url = make_url(pg).set(database="prism_never_created").render_as_string(hide_password=False)
    result = run_cli(*COMMANDS[command], "--json", database_url=url, cwd=tmp_path)
    code, message = one_error_line(result, as_json=True)
    assert code == "database_not_found" and "prism_never_created" in message and "PRISM_DATABASE_URL" in message


@pytest.mark.engine_independent
@pytest.mark.parametrize("command", ["worker", "org list", "audit verify", "keys list"])
def test_a_command_run_away_from_the_default_database_says_where_it_looked(tmp_path: Path, command: str) -> None:
    args = {"worker": ["worker"], "org list": ["org", "list", "--tenant", "acme"],
            "audit verify": ["audit", "verify", "--tenant", "acme"], "keys list": ["keys", "list"]}[command]
    result = run_cli(*args, database_url=None, cwd=tmp_path)
    code, message = one_error_line(result, as_json=False)
    assert code == "database_not_found", message
    assert str(tmp_path / "prism.db") in message and "PRISM_DATABASE_URL" in message, message
    assert list(tmp_path.iterdir()) == []  # no empty database left behind


@pytest.mark.engine_independent
def test_serve_with_redis_configured_but_down_is_refused(tmp_path: Path) -> None:
    result = run_cli(*COMMANDS["serve"], "--json", database_url=None, cwd=tmp_path,
                     PRISM_REDIS_URL=f"redis://:hunter2secret@127.0.0.1:{free_port()}/0")
    code, message = one_error_line(result, as_json=True)
    assert code == "redis_unreachable" and "PRISM_REDIS_URL" in message, message
    assert "hunter2secret" not in result.stderr  # a password in the URL is not echoed


@pytest.mark.engine_independent
def test_serve_with_redis_configured_but_its_client_not_installed_says_what_to_install(tmp_path: Path) -> None:
    # A `redis` module that fails to import, first on the path: the process sees an install without the extra.
    shadow = tmp_path / "without-redis"
    (shadow / "redis").mkdir(parents=True)
    (shadow / "redis" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'redis'\")\n")
    path = os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])
    result = run_cli(*COMMANDS["serve"], database_url=None, cwd=tmp_path, PRISM_REDIS_URL="redis://127.0.0.1:6379/0",
                     PYTHONPATH=path)
    code, message = one_error_line(result, as_json=False)
    assert code == "redis_not_installed" and "prism[redis]" in message and "PRISM_REDIS_URL" in message, message


@pytest.mark.engine_independent
def test_serve_with_tracing_asked_but_opentelemetry_not_installed_says_what_to_install(tmp_path: Path) -> None:
    # An `opentelemetry` package that fails to import, first on the path: an install without the otel extra.
    shadow = tmp_path / "without-opentelemetry"
    (shadow / "opentelemetry").mkdir(parents=True)
    (shadow / "opentelemetry" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'opentelemetry'\")\n")
    path = os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])
    result = run_cli(*COMMANDS["serve"], database_url=None, cwd=tmp_path, PRISM_TRACING="otel", PYTHONPATH=path)
    code, message = one_error_line(result, as_json=False)
    assert code == "tracing_not_installed" and "prism[otel]" in message and "PRISM_TRACING" in message, message
