"""A mission budget is exact across processes: two `prism serve` on one database (SQLite WAL or PostgreSQL),
100 concurrent calls against a budget of 10 → exactly 10 run and one mission.budget_exceeded event."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.processes import Server, ServerPool, clean_env, query, scratch_database


@dataclass
class Pair:
    database_url: str
    servers: list[Server]
    api_key: str


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    log_dir = tmp_path_factory.mktemp("governance-multiprocess")
    with scratch_database(log_dir, "gov") as url:
        pool = ServerPool(log_dir)
        try:
            # Generous start-up time: the machine may be busy with other test runs.
            first = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true"), ready=False)
            first.wait_ready(timeout=120)
            banner = first.banner_json(timeout=120)
            second = pool.start("--json", env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false"), ready=False)
            second.wait_ready(timeout=120)
            yield Pair(url, [first, second], banner["api_key"])
        finally:
            pool.stop_all()


def _envelope(app: str, entity: str, operation: str, **arguments: Any) -> dict[str, Any]:
    return {"app": app, "entity": entity, "operation": operation, "arguments": arguments}


async def test_a_budget_of_ten_runs_exactly_ten_of_a_hundred_calls_spread_over_two_processes(pair: Pair) -> None:
    auth = {"Authorization": f"Bearer {pair.api_key}"}
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=auth) as client:
        made = await client.post(pair.servers[0].base_url + "/api/mcp/tools/prism_mission_control/",
                                 json=_envelope("missions", "mission", "create", name="close", budget_ceiling=10))
        assert made.status_code == 200, made.text
        mission_id = made.json()["data"]["id"]
        started = await client.post(pair.servers[1].base_url + "/api/mcp/tools/prism_mission_control/",
                                    json=_envelope("missions", "mission", "start", id=mission_id))
        assert started.status_code == 200, started.text
        responses = await asyncio.gather(*(
            client.post(pair.servers[i % 2].base_url + "/api/mcp/tools/prism_entity_crud/",
                        json={**_envelope("spare_parts", "spare_part", "list"), "mission_id": mission_id})
            for i in range(100)))
    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 10 and statuses.count(403) == 90, statuses
    assert {r.json()["error"] for r in responses if r.status_code == 403} == {"budget_exceeded"}
    [mission] = query(pair.database_url, "SELECT spent, budget_ceiling FROM missions WHERE id = :id", id=mission_id)
    assert mission == {"spent": 10, "budget_ceiling": 10}
    exceeded = query(pair.database_url, "SELECT payload FROM event_outbox WHERE event_type = 'mission.budget_exceeded'")
    assert len(exceeded) == 1 and mission_id in exceeded[0]["payload"]
