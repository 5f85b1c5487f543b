"""The worker's hot path on the database: how many statements a claim and a results write cost, which rows they
touch, and the consecutive-failure run a success ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text

from prism.config import Settings
from prism.events.outbox import emit
from prism.storage import Database
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.webhooks_fixtures import BASE, DECISION_DATA, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver


async def burst(db: Database, ws: Workspace, count: int) -> None:
    async with db.write() as s:
        for _ in range(count):
            await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id,
                       event_type="governance.decision.allow", data=DECISION_DATA)


@contextmanager
def statements_on(db: Database) -> Iterator[list[tuple[str, bool]]]:
    """(SQL, run on an autocommit connection) of every statement on webhook rows while the block runs."""
    seen: list[tuple[str, bool]] = []

    def record(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "webhook" in statement:
            seen.append((statement, conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"))

    event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", record)


def postgres_only(db: Database) -> None:
    if db.is_sqlite:
        pytest.skip("PostgreSQL's path: SQLite has one writer and claims in a write transaction")


async def test_on_postgresql_a_claim_and_a_results_write_are_one_statement_each_outside_a_transaction(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """Each round trip waits for the worker's busy event loop: a claim of several statements in a transaction
    (BEGIN, SELECT, UPDATE, SELECT, COMMIT) capped what one worker could deliver."""
    postgres_only(hook_db)
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    worker = make_worker(concurrency=8)
    while await worker.run_once():  # what other tests left due goes first: only this test's three are counted
        pass
    await burst(hook_db, ws, 3)
    with statements_on(hook_db) as seen:
        assert await worker.run_once() == 3
    assert len(receiver.at(path)) == 3
    claims = [s for s in seen if "SKIP LOCKED" in s[0]]
    writes = [s for s in seen if "status=" in s[0]]
    # The three outcomes are written together when they arrive in one turn of the loop, which is usual but not
    # certain (the receiver answers each on its own): one write or more, each of them a single statement.
    assert len(claims) == 1 and 1 <= len(writes) <= 3 and len(seen) == len(claims) + len(writes)
    assert all(autocommit for _, autocommit in seen)
    assert {d["status"] for d in await deliveries_of(hook_client, ws, hook["id"])} == {"success"}


async def test_on_postgresql_a_success_leaves_the_webhook_row_alone_when_no_failure_run_is_open(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """Every worker's successes for a busy webhook would otherwise queue behind that one row's lock."""
    postgres_only(hook_db)
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, receiver.url(unique_path()))

    async def row_version() -> str:
        async with hook_db.read() as s:
            return str((await s.execute(text("SELECT xmin::text FROM webhooks WHERE id = :id"),
                                        {"id": hook["id"]})).scalar_one())

    before = await row_version()
    await burst(hook_db, ws, 3)
    assert await make_worker().run_once() >= 3
    assert {d["status"] for d in await deliveries_of(hook_client, ws, hook["id"])} == {"success"}
    assert await row_version() == before


async def test_a_success_ends_the_run_of_consecutive_failures(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    """Failed, delivered, failed: never two failures in a row, so a limit of 2 keeps the webhook active."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(500), Answer(200), Answer(500)])
    hook = await create_hook(hook_client, ws, receiver.url(path), max_retries=0)
    worker = make_worker(hook_settings.model_copy(update={"webhook_deactivate_after_failures": 2}))
    for _ in range(3):
        await burst(hook_db, ws, 1)
        await worker.run_once()
    statuses = sorted(d["status"] for d in await deliveries_of(hook_client, ws, hook["id"]))
    assert statuses == ["failed", "failed", "success"]
    read = (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).json()
    assert read["is_active"] is True and read["deactivated_reason"] is None
