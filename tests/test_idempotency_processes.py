"""Idempotency across processes: two `prism serve` on one database (PostgreSQL, or a SQLite file in WAL mode),
concurrent repeats of one keyed call spread over both run it once and all get its answer; the ledger holds one
run and the replays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from prism.kit.canonical import digest
from tests.processes import TRACEBACK, Server, ServerPool, clean_env, query, scratch_database

TOOL = "/api/mcp/tools/prism_entity_crud/"


@dataclass
class Pair:
    database_url: str
    servers: list[Server]
    api_key: str


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    log_dir = tmp_path_factory.mktemp("idempotency-processes")
    with scratch_database(log_dir, "idem") as url:
        pool = ServerPool(log_dir)
        try:
            first = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true"), ready=False)
            first.wait_ready(timeout=120)
            banner = first.banner_json(timeout=120)
            second = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false"), ready=False)
            second.wait_ready(timeout=120)
            yield Pair(url, [first, second], banner["api_key"])
            assert not [s.stderr for s in pool.started if TRACEBACK in s.stderr]
        finally:
            pool.stop_all()


async def test_twenty_repeats_over_two_processes_create_one_record_and_answer_alike(pair: Pair) -> None:
    sku = f"TWIN-{uuid.uuid4().hex[:8]}"
    arguments = {"sku": sku, "name": "part made once"}
    envelope = {"app": "spare_parts", "entity": "spare_part", "operation": "create", "arguments": arguments}
    headers = {"Authorization": f"Bearer {pair.api_key}", "Idempotency-Key": str(uuid.uuid4())}
    limits = httpx.Limits(max_connections=40, max_keepalive_connections=40)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=headers) as client:
        answers = await asyncio.gather(*(client.post(pair.servers[i % 2].base_url + TOOL, json=envelope)
                                         for i in range(20)))
        other = await client.post(pair.servers[1].base_url + TOOL,
                                  json={**envelope, "arguments": {**arguments, "name": "another part"}})
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert len({a.content for a in answers}) == 1
    assert [a.headers.get("idempotent-replayed") for a in answers].count(None) == 1
    assert other.status_code == 409 and other.json()["error"] == "idempotency_key_reused"
    assert query(pair.database_url, "SELECT count(*) AS n FROM spare_parts WHERE sku = :sku", sku=sku) == [{"n": 1}]
    outcomes = query(pair.database_url, "SELECT outcome, count(*) AS n FROM audit_entries "
                     "WHERE arguments_digest = :digest GROUP BY outcome ORDER BY outcome", digest=digest(arguments))
    assert outcomes == [{"outcome": "allowed", "n": 1}, {"outcome": "replayed", "n": 19}]
