"""Two `prism serve` processes on one database (SQLite file in WAL mode, or PostgreSQL): concurrent calls
through both extend ONE valid audit chain, with contiguous sequence numbers and nothing lost."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import TRACEBACK, Server, ServerPool, clean_env, cli_json, query, run_cli, scratch_database

TOOL = "/api/mcp/tools/prism_entity_crud/"
DEMO_ORG = "demo-ops"
SEEDED_PARTS = 6


@dataclass
class Cluster:
    database_url: str
    servers: list[Server]
    api_key: str
    log_dir: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    log_dir = tmp_path_factory.mktemp("multiprocess")
    with scratch_database(log_dir, "multi") as url:
        pool = ServerPool(log_dir)
        try:
            first = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true",
                                                       PRISM_CREDENTIAL_CACHE_SECONDS="1"))
            banner = first.banner_json()
            assert banner["seeded"] is True and banner["tenant"] == "demo", first.describe()
            second = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false",
                                                        PRISM_CREDENTIAL_CACHE_SECONDS="1"))
            assert second.banner_json() == {"url": second.base_url, "seeded": False}, second.describe()
            yield Cluster(url, [first, second], banner["api_key"], log_dir)
        finally:
            pool.stop_all()


def demo_chain(cluster: Cluster) -> dict[str, Any]:
    """The demo organization's log, verified after sealing what the servers' sealers have not reached yet."""
    cli_json("audit", "seal", database_url=cluster.database_url)
    out = cli_json("audit", "verify", "--tenant", "demo", database_url=cluster.database_url)
    assert out["valid"] is True, out
    [chain] = [c for c in out["logs"] if c["organization"] == DEMO_ORG]
    return dict(chain)


def ledger(cluster: Cluster, after_seq: int) -> list[dict[str, Any]]:
    return query(cluster.database_url, "SELECT e.seq, e.outcome, e.coordinate, e.error_code FROM audit_entries e "
                 "JOIN organizations o ON o.id = e.organization_id WHERE o.slug = :slug AND e.seq > :after "
                 "ORDER BY e.seq", slug=DEMO_ORG, after=after_seq)


async def fire(requests: list[tuple[Server, str, dict[str, Any]]]) -> list[httpx.Response]:
    """Send every request at once: (server, key, envelope)."""
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=len(requests))
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return list(await asyncio.gather(*(
            client.post(server.base_url + TOOL, headers={"Authorization": f"Bearer {key}"}, json=envelope)
            for server, key, envelope in requests)))


def envelope(operation: str, **arguments: Any) -> dict[str, Any]:
    return {"app": "spare_parts", "entity": "spare_part", "operation": operation, "arguments": arguments}


def test_sqlite_runs_in_wal_mode(cluster: Cluster) -> None:
    if not cluster.database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL run")
    path = cluster.database_url.removeprefix("sqlite:///")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_200_concurrent_calls_through_two_processes_leave_one_valid_chain(cluster: Cluster) -> None:
    before = demo_chain(cluster)["tree_size"]
    requests = []
    for i in range(200):
        server = cluster.servers[i % 2]
        if i % 4 < 2:
            requests.append((server, cluster.api_key, envelope("create", sku=f"MP-{i:03d}", name=f"Part {i}",
                                                               quantity=i)))
        else:
            requests.append((server, cluster.api_key, envelope("list", page_size=5)))
    responses = await fire(requests)

    failures = [(r.status_code, r.text) for r in responses if r.status_code != 200 or r.json()["success"] is not True]
    assert failures == [], failures[:5]
    created = [r.json()["data"] for r in responses if r.json()["data"].get("sku", "").startswith("MP-")]
    assert len(created) == 100 and len({p["id"] for p in created}) == 100

    chain = demo_chain(cluster)
    assert chain["waiting"] == 0 and chain["tree_size"] == before + 200, chain
    entries = ledger(cluster, before)
    assert [e["seq"] for e in entries] == list(range(before + 1, before + 201))
    assert Counter(e["coordinate"].rsplit("/", 1)[1] for e in entries) == {"create": 100, "list": 100}
    assert {e["outcome"] for e in entries} == {"allowed"}
    stored = query(cluster.database_url, "SELECT COUNT(*) AS n FROM spare_parts WHERE sku LIKE 'MP-%'")
    assert stored == [{"n": 100}]

    # Both processes see every part, whichever process wrote it.
    for r in await fire([(server, cluster.api_key, envelope("list", search="MP-", page_size=1))
                         for server in cluster.servers]):
        assert r.json()["data"]["total"] == 100, r.text


async def test_concurrent_refusals_and_writes_through_two_processes_stay_chained(cluster: Cluster) -> None:
    # A read-only key minted by the CLI, a third process, while both servers run.
    reader = cli_json("key", "create", "--tenant", "demo", "--email", "admin@demo.example.com", "--scopes",
                      "mcp:read", "--prefix", "ck", database_url=cluster.database_url)["api_key"]
    before = demo_chain(cluster)["tree_size"]
    requests = []
    for i in range(60):
        server = cluster.servers[i % 2]
        kind = i % 3
        if kind == 0:  # a duplicate of a seeded SKU: 409, rolled back alone inside the shared transaction
            requests.append((server, cluster.api_key, envelope("create", sku="BRG-6204", name="Duplicate")))
        elif kind == 1:  # a write with a read-only key: 403 before anything runs
            requests.append((server, reader, envelope("create", sku=f"RO-{i:03d}", name="Refused")))
        else:
            requests.append((server, cluster.api_key, envelope("create", sku=f"OK-{i:03d}", name="Fine")))
    responses = await fire(requests)

    statuses = Counter(r.status_code for r in responses)
    assert statuses == {409: 20, 403: 20, 200: 20}, [r.text for r in responses if r.status_code >= 500][:3]
    assert all(r.json()["success"] is (r.status_code == 200) for r in responses)
    chain = demo_chain(cluster)
    assert chain["waiting"] == 0 and chain["tree_size"] == before + 60, chain
    entries = ledger(cluster, before)
    assert [e["seq"] for e in entries] == list(range(before + 1, before + 61))
    assert Counter((e["outcome"], e["error_code"]) for e in entries) == {
        ("refused", "conflict"): 20, ("refused", "permission_denied"): 20, ("allowed", None): 20}
    assert query(cluster.database_url, "SELECT COUNT(*) AS n FROM spare_parts WHERE sku LIKE 'RO-%' "
                 "OR sku LIKE 'OK-%'") == [{"n": 20}]
    assert query(cluster.database_url, "SELECT COUNT(*) AS n FROM spare_parts WHERE sku = 'BRG-6204'") == [{"n": 1}]


def test_a_key_revoked_by_the_cli_stops_working_on_both_processes(cluster: Cluster) -> None:
    key = cli_json("key", "create", "--tenant", "demo", "--email", "admin@demo.example.com",
                   database_url=cluster.database_url)
    headers = {"Authorization": f"Bearer {key['api_key']}"}
    for server in cluster.servers:
        assert httpx.get(server.base_url + "/api/v1/dev/me/", headers=headers, timeout=10).status_code == 200
    cli_json("key", "revoke", key["key_id"], "--tenant", "demo", database_url=cluster.database_url)
    time.sleep(1.2)  # the servers trust a verified key for PRISM_CREDENTIAL_CACHE_SECONDS=1
    for server in cluster.servers:
        r = httpx.get(server.base_url + "/api/v1/dev/me/", headers=headers, timeout=10)
        assert r.status_code == 401, r.text


def test_no_server_logged_an_error(cluster: Cluster) -> None:
    for server in cluster.servers:
        assert server.proc.poll() is None, server.describe()
        assert TRACEBACK not in server.stderr and "ERROR" not in server.stderr, server.describe()


def test_servers_shut_down_cleanly(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "shutdown") as url:
        pool = ServerPool(tmp_path)
        try:
            server = pool.start("--json", "--seed-demo", env=clean_env(PRISM_DATABASE_URL=url))
            key = server.banner_json()["api_key"]
            r = httpx.post(server.base_url + TOOL, headers={"Authorization": f"Bearer {key}"},
                           json=envelope("list"), timeout=10)
            assert r.json()["success"] is True, r.text
            # Uvicorn finishes the shutdown, then re-raises SIGTERM: the exit status is -15, not a crash.
            assert server.stop() in (0, -signal.SIGTERM), server.describe()
            assert "Application shutdown complete" in server.stderr, server.describe()
            assert TRACEBACK not in server.stderr, server.describe()
        finally:
            pool.stop_all()
        # The process is gone, and its database is usable by the next one.
        result = run_cli("audit", "verify", "--tenant", "demo", "--json", database_url=url)
        [log] = result.json["logs"]
        assert result.returncode == 0 and log["tree_size"] + log["waiting"] == 1, str(result)
