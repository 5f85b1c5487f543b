"""One organization's hanging receiver must not hold back every other organization's deliveries."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
from sqlalchemy import select

from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.worker import HANGING_AFTER_TIMEOUTS, DeliveryWorker
from tests.factories import Factory
from tests.test_webhooks_workers import burst
from tests.webhooks_fixtures import (  # noqa: F401
    BASE,
    create_hook,
    hook_app_fixture,
    hook_client_fixture,
    hook_db_fixture,
    hook_settings_fixture,
    make_worker_fixture,
    receiver_fixture,
    tls_fixture,
    unique_path,
)
from tests.webhooks_receiver import Answer, Receiver


async def test_a_hanging_receivers_backlog_does_not_delay_another_organizations_delivery(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """Organization A's receiver answers only after its 1 s timeout and has 30 deliveries due; B's one delivery is
    due just after them. With 3 slots, sending A's backlog first would keep B's waiting for 10 timeouts; once A's
    first sends have timed out, its queue is held back and B's goes out."""
    slots = HANGING_AFTER_TIMEOUTS
    slow, fast = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    slow_path, fast_path = unique_path(), unique_path()
    receiver.script(slow_path, [Answer(200, delay=1.5)] * 30)
    hook = await create_hook(hook_client, slow, receiver.url(slow_path), timeout_seconds=1)
    await create_hook(hook_client, fast, receiver.url(fast_path))
    await burst(hook_db, slow, 10 * slots)
    await burst(hook_db, fast, 1)
    worker = make_worker(concurrency=slots)
    started = time.monotonic()
    running = asyncio.create_task(worker.run())
    try:
        await receiver.wait_for(fast_path, 1, within=30)
        waited = time.monotonic() - started
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert waited < 5, f"B's delivery waited {waited:.1f} s behind A's backlog"
    # A's deliveries are held back, not lost nor failed: each is still to be sent (again).
    async with hook_db.read() as s:
        statuses = list((await s.execute(select(WebhookDelivery.status).where(
            WebhookDelivery.webhook_id == hook["id"]))).scalars())
    assert len(statuses) == 10 * slots and set(statuses) <= {"pending", "retrying"}
    # Its backlog would otherwise be due again, ahead of the next tests' deliveries.
    assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=slow.headers())).status_code == 204


async def test_a_receiver_answering_just_before_its_timeout_does_not_delay_another_organizations_delivery(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """As above, but A's receiver answers (500) just before its 2 s timeout instead of never: its sends hold the
    slots nearly as long, so they count as slow and its queue is held back all the same."""
    slots = HANGING_AFTER_TIMEOUTS
    slow, fast = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    slow_path, fast_path = unique_path(), unique_path()
    receiver.script(slow_path, [Answer(500, delay=1.8)] * 30)
    hook = await create_hook(hook_client, slow, receiver.url(slow_path), timeout_seconds=2)
    await create_hook(hook_client, fast, receiver.url(fast_path))
    await burst(hook_db, slow, 10 * slots)
    await burst(hook_db, fast, 1)
    worker = make_worker(concurrency=slots)
    started = time.monotonic()
    running = asyncio.create_task(worker.run())
    try:
        await receiver.wait_for(fast_path, 1, within=40)
        waited = time.monotonic() - started
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert waited < 8, f"B's delivery waited {waited:.1f} s behind A's backlog"
    assert len(receiver.at(slow_path)) <= 2 * slots
    assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=slow.headers())).status_code == 204
