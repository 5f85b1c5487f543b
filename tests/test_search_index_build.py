"""A registry's search index is built off the event loop: after an import the new handlers are served at once and
the index follows on a worker thread; a search that comes before it builds it there after its call is committed."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from weakref import WeakKeyDictionary

import httpx
import pytest

from prism.integrations.runtime import IntegrationRuntime
from prism.registry import Registry, search
from prism.registry.registry import build_registry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
URL = "/api/v1/dev/introspect/"

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


class RecordedBuilds:
    """Stands in for SearchIndex: where each index was built. The builds of the registries in `held_for` wait until
    `release`; no other build is held (the test app's own runtime builds its registries too, on the same index
    builder thread: holding those would keep its own searches waiting)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, held_for: list[Registry] | None = None) -> None:
        self.threads: list[str] = []
        self.registries: list[Registry] = []
        self.release = threading.Event()
        held = held_for if held_for is not None else []
        real = search.SearchIndex
        recorder = self

        class Recording(real):  # type: ignore[misc,valid-type]
            def __init__(self, registry: Registry) -> None:
                recorder.threads.append(threading.current_thread().name)
                recorder.registries.append(registry)
                if any(registry is r for r in held):
                    recorder.release.wait(timeout=30)
                super().__init__(registry)

        monkeypatch.setattr(search, "SearchIndex", Recording)
        monkeypatch.setattr(search, "_INDEXES", WeakKeyDictionary())  # every registry unbuilt


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace()


async def test_the_first_search_builds_the_index_on_a_worker_thread_after_its_call(
        client: httpx.AsyncClient, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = RecordedBuilds(monkeypatch)
    refused = await client.get(URL, params={"dimension": "capability_search", "app": "no_such_app",
                                            "query": "assign a ticket"}, headers=ws.headers())
    assert refused.status_code == 404 and builds.threads == []  # refused by the audited call, nothing built
    found = await client.get(URL, params={"dimension": "capability_search", "query": "assign a ticket",
                                          "rerank": "false"}, headers=ws.headers())
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["coordinate"] == "workflow_action/itsm/ticket/assign"
    assert len(builds.threads) == 1 and builds.threads[0] != threading.main_thread().name
    again = await client.get(URL, params={"dimension": "capability_search", "query": "assign a ticket",
                                          "rerank": "false"}, headers=ws.headers())
    assert again.json()["results"] == found.json()["results"] and len(builds.threads) == 1


async def test_prism_search_builds_it_the_same_way(client: httpx.AsyncClient, ws: Workspace,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    builds = RecordedBuilds(monkeypatch)
    body = await ok(client, ws, "report_query/core/registry/search", {"query": "assign a ticket"})
    assert body["results"][0]["coordinate"] == "workflow_action/itsm/ticket/assign"
    assert len(builds.threads) == 1 and builds.threads[0] != threading.main_thread().name


async def test_an_import_is_served_before_its_search_index_is_built(
        client: httpx.AsyncClient, ws: Workspace, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
             {"name": "wh_index_later", "spec": WAREHOUSE.read_text()})
    installed: list[Registry] = []
    runtime = IntegrationRuntime(db, build_registry(), installed.append)
    builds = RecordedBuilds(monkeypatch, held_for=installed)
    try:
        await asyncio.wait_for(runtime.refresh(force=True), timeout=10)  # does not wait for the index
        assert len(installed) == 1
        served = installed[0]
        assert any(h.integration == "wh_index_later" for h in served)
        assert search.built_index(served) is None
    finally:
        builds.release.set()
    for _ in range(300):  # the worker thread builds it once released
        if search.built_index(served) is not None:
            break
        await asyncio.sleep(0.05)
    assert search.built_index(served) is not None
    assert builds.threads and all(name != threading.main_thread().name for name in builds.threads)


async def test_imports_in_quick_succession_build_one_index_at_a_time_for_the_registry_served(
        client: httpx.AsyncClient, ws: Workspace, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[Registry] = []
    runtime = IntegrationRuntime(db, build_registry(), installed.append)
    builds = RecordedBuilds(monkeypatch, held_for=installed)
    try:
        for n in range(4):  # four imports while the first index is still being built
            await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
                     {"name": f"wh_quick_{n}", "spec": WAREHOUSE.read_text()})
            await asyncio.wait_for(runtime.refresh(), timeout=10)
        assert len(installed) == 4
    finally:
        builds.release.set()
    latest = installed[-1]
    for _ in range(300):
        if search.built_index(latest) is not None:
            break
        await asyncio.sleep(0.05)
    assert search.built_index(latest) is not None
    # The build that started first, then the latest registry's: none for those in between. (The test app's own
    # runtime builds its registries too: not counted.)
    mine = [r for r in builds.registries if r in installed]
    assert len(mine) <= 2 and mine[-1] is latest


async def test_builds_waiting_for_another_hold_no_thread_of_the_loops_default_executor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds wait for each other on the index builder's own thread. Meanwhile the loop's default executor, which
    password checks, the tenant descriptor and a registry's assembly use, answers at once: when builds ran there,
    as many builds waiting for a long one as it has threads took all of them."""
    registry = build_registry()
    builds = RecordedBuilds(monkeypatch, held_for=[registry])
    default_threads = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's own default
    queued = [asyncio.ensure_future(search.on_index_builder(search.warm, [registry]))
              for _ in range(default_threads + 2)]
    try:
        await asyncio.sleep(0.2)
        assert await asyncio.wait_for(asyncio.to_thread(threading.current_thread), timeout=5) is not None
    finally:
        builds.release.set()
    await asyncio.wait_for(asyncio.gather(*queued), timeout=60)
    assert search.built_index(registry) is not None and builds.registries.count(registry) == 1
