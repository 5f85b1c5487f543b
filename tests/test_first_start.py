"""The first `prism serve`: its one-time credentials appear only once Prism listens, a start that fails before
that leaves them for the next one, and the demo tenant is seeded only where it belongs."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from tests.processes import HOST, TRACEBACK, ServerPool, clean_env, free_port, run_cli, scratch_database

pytestmark = pytest.mark.engine_independent


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[ServerPool]:
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = ServerPool(logs)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    return empty


def tenants(db_file: Path) -> int:
    with closing(sqlite3.connect(db_file)) as conn:
        n: int = conn.execute("SELECT COUNT(*) FROM tenants").fetchone()[0]
    return n


def error_line(stderr: str) -> dict[str, str]:
    """The last line of stderr, which must be the one JSON error `--json` promises."""
    body: dict[str, str] = json.loads(stderr.strip().splitlines()[-1])
    assert set(body) == {"error", "message"}, stderr
    return body


def assert_key_works(base_url: str, key: str) -> None:
    me = httpx.get(f"{base_url}/api/v1/dev/me/", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert me.status_code == 200, me.text
    assert me.json()["tenant"]["subdomain"] == "demo"


def test_a_start_on_a_port_in_use_shows_no_key_and_the_next_start_shows_a_working_one(
        servers: ServerPool, workdir: Path) -> None:
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        failed = run_cli("serve", "--host", HOST, "--port", str(port), "--json", database_url=None, cwd=workdir)
    assert failed.returncode == 1, str(failed)
    assert failed.stdout == "", str(failed)  # no banner, no key
    assert TRACEBACK not in failed.stderr
    refusal = error_line(failed.stderr)
    assert refusal["error"] == "address_in_use" and str(port) in refusal["message"], str(failed)
    assert tenants(workdir / "prism.db") == 0  # nothing seeded that nobody saw

    server = servers.start("--json", env=clean_env(), cwd=workdir)
    banner = server.banner_json()
    assert banner["seeded"] is True and isinstance(banner["admin_password"], str), banner
    assert_key_works(server.base_url, banner["api_key"])


def test_a_bad_apps_setting_stops_the_start_before_seeding_and_names_the_setting(
        servers: ServerPool, workdir: Path) -> None:
    failed = run_cli("serve", "--host", HOST, "--port", str(free_port()), database_url=None, cwd=workdir,
                     PRISM_APPS="prism_no_such_module.handlers")
    assert failed.returncode == 1, str(failed)
    assert failed.stdout == "" and TRACEBACK not in failed.stderr, str(failed)
    [line] = failed.stderr.strip().splitlines()
    assert line.startswith("error: PRISM_APPS entry 'prism_no_such_module.handlers'"), line
    if (workdir / "prism.db").exists():
        assert tenants(workdir / "prism.db") == 0

    server = servers.start("--json", env=clean_env(), cwd=workdir)
    assert_key_works(server.base_url, server.banner_json()["api_key"])


def test_the_key_is_printed_only_once_the_port_answers(servers: ServerPool, workdir: Path) -> None:
    server = servers.start("--json", env=clean_env(), cwd=workdir, ready=False)
    deadline = time.monotonic() + 60
    while not server.stdout.strip():
        assert server.proc.poll() is None and time.monotonic() < deadline, server.describe()
        time.sleep(0.01)
    # The banner is there: the very first request, without any retry, reaches the server.
    banner = json.loads(server.stdout)
    assert_key_works(server.base_url, banner["api_key"])


def test_a_database_named_by_url_is_not_seeded_unless_asked(servers: ServerPool, tmp_path: Path) -> None:
    with scratch_database(tmp_path, "unseeded") as url:
        plain = servers.start("--json", env=clean_env(PRISM_DATABASE_URL=url))
        assert plain.banner_json() == {"url": plain.base_url, "seeded": False}, plain.describe()
        plain.stop()
        asked = servers.start("--json", "--seed-demo", env=clean_env(PRISM_DATABASE_URL=url))
        banner = asked.banner_json()
        assert banner["seeded"] is True and banner["tenant"] == "demo", asked.describe()
        assert_key_works(asked.base_url, banner["api_key"])
        asked.stop()


def test_the_seed_setting_seeds_a_database_named_by_url(servers: ServerPool, tmp_path: Path) -> None:
    with scratch_database(tmp_path, "seeded") as url:
        server = servers.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true"))
        assert server.banner_json()["seeded"] is True, server.describe()


def test_no_seed_demo_leaves_even_the_embedded_default_empty(servers: ServerPool, workdir: Path) -> None:
    server = servers.start("--json", "--no-seed-demo", env=clean_env(), cwd=workdir)
    assert server.banner_json() == {"url": server.base_url, "seeded": False}
    server.stop()
    assert tenants(workdir / "prism.db") == 0
