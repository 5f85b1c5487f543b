"""On PostgreSQL a delivery worker times claims, leases, retries and hold-backs by the database's clock, the one
clock workers on many hosts share: by its host's own, a host ahead by more than a lease would take a delivery
another worker is still sending, and one behind would lease for too short a time. SQLite is one host: its
workers use that host's clock, and these tests do not apply.

A host whose clock is an hour behind the database's is made real here the other way round: the worker's
connections see a `now()` an hour ahead (a function of that name in a schema searched before pg_catalog)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select, text

from prism.config import Settings
from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.worker import DeliveryWorker, lease_seconds
from tests.factories import Factory
from tests.test_webhooks_workers import burst
from tests.webhooks_fixtures import create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver

AHEAD = timedelta(hours=1)


@pytest.fixture(name="database_ahead")
async def database_ahead_fixture(hook_db: Database) -> AsyncIterator[Database]:
    """The test database, through connections whose `now()` is AHEAD of this host's clock."""
    if hook_db.is_sqlite:
        pytest.skip("SQLite is one host: its workers use that host's clock")
    schema = "clock_" + uuid.uuid4().hex[:12]
    async with hook_db.write() as session:
        await session.execute(text(f"CREATE SCHEMA {schema}"))
        await session.execute(text(
            f"CREATE FUNCTION {schema}.now() RETURNS timestamptz LANGUAGE sql STABLE "
            "AS $$ SELECT pg_catalog.now() + interval '1 hour' $$"))
    ahead = Database(hook_db.url)

    @event.listens_for(ahead.engine.sync_engine, "connect")
    def search_the_clock_first(connection: Any, _record: Any) -> None:  # outside any transaction: it stays set
        connection.run_async(lambda raw: raw.execute(f"SET search_path = {schema}, public, pg_catalog"))

    yield ahead
    await ahead.dispose()
    async with hook_db.write() as session:
        await session.execute(text(f"DROP SCHEMA {schema} CASCADE"))


def _close_to(moment: datetime | None, expected: datetime, within: float = 5.0) -> bool:
    return moment is not None and abs((moment - expected).total_seconds()) < within


async def _row(db: Database, delivery_id: str) -> WebhookDelivery:
    async with db.read() as session:
        return (await session.execute(select(WebhookDelivery).where(WebhookDelivery.id == delivery_id))).scalar_one()


async def test_a_lease_and_a_retry_are_timed_by_the_databases_clock(
        hook_client: httpx.AsyncClient, hook_db: Database, database_ahead: Database, factory: Factory,
        receiver: Receiver, hook_settings: Settings, make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(500)])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=60)
    await burst(hook_db, ws, 1)
    worker = make_worker()
    worker.db = database_ahead  # this worker's host is an hour behind its database
    worker._autocommit = database_ahead.engine.execution_options(isolation_level="AUTOCOMMIT")
    [job] = await worker.claim(10)
    leased = await _row(hook_db, job.delivery_id)
    assert _close_to(leased.claimed_until, utcnow() + AHEAD + timedelta(
        seconds=lease_seconds(hook_settings, hook["timeout_seconds"]))), leased.claimed_until

    await worker._deliver(job)  # the receiver answers 500: retried in 60 s, by the database's clock
    retrying = await _row(hook_db, job.delivery_id)
    assert retrying.status == "retrying" and retrying.claimed_until is None
    assert _close_to(retrying.due_at, utcnow() + AHEAD + timedelta(seconds=60)), retrying.due_at
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "retrying"
