"""The README quickstart, as a user runs it: `prism serve` in an empty directory, no settings at all."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import TRACEBACK, Server, ServerPool, clean_env, prism_command

SEEDED_SKUS = {"BRG-6204", "BLT-A42", "FLT-HY10", "SEL-2535", "MTR-0075", "FUS-10A"}
KEY_LINE = r"^API key \(shown once\): (\S+)$"
CURL_LINE = r"^\s+(curl .+)$"


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


def count(db_file: Path, table: str) -> int:
    with closing(sqlite3.connect(db_file)) as conn:
        n: int = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608
    return n


def run_curl(line: str) -> dict[str, Any]:
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def assert_clean(server: Server) -> None:
    assert TRACEBACK not in server.stderr, server.describe()


def test_serve_in_an_empty_directory_seeds_demo_and_prints_a_curl_line_that_works(
        servers: ServerPool, workdir: Path) -> None:
    env = clean_env()
    server = servers.start(env=env, cwd=workdir)
    key = server.banner_text(KEY_LINE).group(1)
    curl = server.banner_text(CURL_LINE).group(1)
    assert f"Prism listening on {server.base_url}" in server.stdout
    assert "Seeded tenant 'demo'" in server.stdout
    assert key.startswith("ck_") and key in curl and f"{server.base_url}/api/mcp/tools/prism_entity_crud/" in curl
    # The SQLite file lives in the directory `prism serve` was started in.
    db_file = workdir / "prism.db"
    assert db_file.is_file()

    assert httpx.get(f"{server.base_url}/api/v1/dev/ping/", timeout=10).json()["status"] == "ok"
    body = run_curl(curl)
    assert body["success"] is True and body["tool_name"] == "prism_entity_crud", body
    assert body["data"]["total"] == len(SEEDED_SKUS)
    assert {p["sku"] for p in body["data"]["items"]} == SEEDED_SKUS
    server.stop()
    assert_clean(server)

    # A second start on the same directory: no new tenant, no new key, and the first key still works.
    again = servers.start(env=env, cwd=workdir)
    again.banner_text(rf"^Prism listening on {again.base_url}$")
    assert "API key" not in again.stdout and "Seeded" not in again.stdout, again.describe()
    body = run_curl(curl.replace(server.base_url, again.base_url))
    assert body["success"] is True and body["data"]["total"] == len(SEEDED_SKUS), body
    assert count(db_file, "tenants") == 1 and count(db_file, "api_keys") == 1
    assert count(db_file, "spare_parts") == len(SEEDED_SKUS)
    assert sorted(p.name for p in workdir.iterdir() if not p.name.startswith("prism.db")) == []
    again.stop()
    assert_clean(again)


def printed_besides_logs(stdout: str) -> list[Any]:
    """`prism serve --json` prints JSON lines: its banner on one line, and its own log lines (docs/operations.md)."""
    return [document for document in map(json.loads, stdout.splitlines()) if "logger" not in document]


def test_serve_json_banner_holds_the_key_and_the_curl_line(servers: ServerPool, workdir: Path) -> None:
    env = clean_env()
    server = servers.start("--json", env=env, cwd=workdir)
    banner = server.banner_json()
    assert set(banner) == {"url", "seeded", "tenant", "api_key", "admin_email", "admin_password", "curl"}
    assert banner["url"] == server.base_url and banner["seeded"] is True and banner["tenant"] == "demo"
    assert banner["api_key"].startswith("ck_") and banner["admin_email"] == "admin@demo.example.com"
    assert isinstance(banner["admin_password"], str) and len(banner["admin_password"]) >= 8
    assert banner["api_key"] in banner["curl"] and banner["url"] in banner["curl"]
    assert printed_besides_logs(server.stdout) == [banner], server.stdout

    me = httpx.get(f"{server.base_url}/api/v1/dev/me/", headers={"Authorization": f"Bearer {banner['api_key']}"},
                   timeout=10)
    assert me.status_code == 200, me.text
    assert me.json()["tenant"]["subdomain"] == "demo" and me.json()["user"]["email"] == banner["admin_email"]
    assert run_curl(banner["curl"])["success"] is True
    server.stop()

    again = servers.start("--json", env=env, cwd=workdir)
    assert again.banner_json() == {"url": again.base_url, "seeded": False}
    assert printed_besides_logs(again.stdout) == [{"url": again.base_url, "seeded": False}], again.stdout
    again.stop()
    assert_clean(server)
    assert_clean(again)


def test_serve_without_demo_seeding_leaves_the_database_empty(servers: ServerPool, workdir: Path) -> None:
    server = servers.start("--json", env=clean_env(PRISM_SEED_DEMO="false"), cwd=workdir)
    assert server.banner_json() == {"url": server.base_url, "seeded": False}
    server.stop()
    assert count(workdir / "prism.db", "tenants") == 0
    assert_clean(server)


def test_a_database_that_cannot_be_prepared_stops_serve_with_its_error(workdir: Path) -> None:
    """Nothing is served, and no banner printed, over a database the migrations could not prepare."""
    missing = workdir / "no such directory" / "prism.db"
    done = subprocess.run([*prism_command(), "serve", "--port", "1"], env=clean_env(PRISM_DATABASE_URL=f"sqlite:///{missing}"),
                          cwd=workdir, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "unable to open database file" in done.stderr
    assert "Prism listening" not in done.stdout

