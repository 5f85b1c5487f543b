"""`prism serve --workers 2` on PostgreSQL: one scrape, whichever worker answers it, counts the requests both
workers served; the workers' metrics directory is private to the server and gone once it stops."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.metrics_support import sample
from tests.processes import ServerPool, clean_env, postgres_test_url, scratch_database

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}

pytestmark = pytest.mark.skipif(postgres_test_url() is None, reason="several workers need PostgreSQL")


def access_pids(stdout: str, path: str) -> set[int]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"ts"')]
    return {line["pid"] for line in lines if line["logger"] == "prism.access" and line["path"] == path}


def test_one_scrape_adds_up_every_worker(tmp_path: Path, server_pool: ServerPool) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    with scratch_database(tmp_path, "metrics") as url:
        server = server_pool.start("--workers", "2", "--json", ready=False,
                                   env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="true", TMPDIR=str(temp),
                                                 PRISM_RATE_LIMIT_PER_PROCESS="true"))
        server.wait_ready(timeout=120)
        key = server.banner_json(timeout=120)["api_key"]
        [metrics_dir] = list(temp.glob("prism-metrics-*"))
        sent = 0
        # A new connection per request: the kernel hands each to whichever worker accepts first.
        while sent < 40 or len(access_pids(server.stdout, TOOL)) < 2:
            assert sent < 400, f"every request went to one worker:\n{server.describe()}"
            with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {key}",
                                                                 "Host": "demo.localhost"}) as client:
                assert client.post(TOOL, json=LIST_PARTS).status_code == 200
            sent += 1
        for _ in range(4):  # whichever worker answers a scrape, it reports both
            with httpx.Client(base_url=server.base_url) as client:
                text = client.get("/metrics").text
            assert sample(text, "prism_http_requests_total", door="rest", status_class="2xx",
                          tool="entity_crud") == sent, text
            assert sample(text, "prism_dispatch_duration_seconds_count", door="rest") == sent
        assert len(access_pids(server.stdout, "/metrics")) >= 1
        assert server.stop() == 0, server.describe()
        assert not metrics_dir.exists()
