"""One organization's hanging or slow receiver must not hold back every other organization's deliveries."""

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
from tests.webhooks_fixtures import BASE, create_hook, unique_path
from tests.webhooks_receiver import Answer, Receiver

# A's deliveries due: 10 per slot of the worker.
BACKLOG = 10 * HANGING_AFTER_TIMEOUTS


async def race(hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
               make_worker: Callable[..., DeliveryWorker], answers: list[Answer], timeout_seconds: int,
               within: float) -> tuple[float, list[str], int]:
    """Organization A's receiver answers as `answers` say, its webhook has `timeout_seconds`, and as many of its
    deliveries as answers are due, for a worker of HANGING_AFTER_TIMEOUTS slots. Once A's deliveries hold every
    slot, organization B's one delivery becomes due. Answers how long B's waited to reach its receiver (at most
    `within`), the statuses of A's deliveries then, and how many of them A's receiver had been sent by then; A's
    webhook is deleted (its backlog would otherwise be due again, ahead of the next tests' deliveries)."""
    slots = HANGING_AFTER_TIMEOUTS
    slow, fast = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    slow_path, fast_path = unique_path(), unique_path()
    receiver.script(slow_path, answers)
    hook = await create_hook(hook_client, slow, receiver.url(slow_path), timeout_seconds=timeout_seconds)
    try:
        await create_hook(hook_client, fast, receiver.url(fast_path))
        await burst(hook_db, slow, len(answers))
        running = asyncio.create_task(make_worker(concurrency=slots).run())
        try:
            await receiver.wait_for(slow_path, slots, within=10)  # every slot is A's
            started = time.monotonic()
            await burst(hook_db, fast, 1)
            await receiver.wait_for(fast_path, 1, within=within)
            waited, sent_to_a = time.monotonic() - started, len(receiver.at(slow_path))
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        async with hook_db.read() as s:
            statuses = list((await s.execute(select(WebhookDelivery.status).where(
                WebhookDelivery.webhook_id == hook["id"]))).scalars())
    finally:
        assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=slow.headers())).status_code == 204
    return waited, statuses, sent_to_a


async def test_a_hanging_receivers_backlog_does_not_delay_another_organizations_delivery(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """A's receiver answers only after its 1 s timeout. Sending A's backlog first would keep B's delivery waiting
    for 10 timeouts; B's goes out at the first free slot, and once A's first sends have timed out, A's queue is
    held back."""
    waited, statuses, _ = await race(hook_client, hook_db, factory, receiver, make_worker,
                                     [Answer(200, delay=1.5)] * BACKLOG, timeout_seconds=1, within=30)
    assert waited < 5, f"B's delivery waited {waited:.1f} s behind A's backlog"
    # A's deliveries are held back, not lost nor failed: each is still to be sent (again).
    assert len(statuses) == BACKLOG and set(statuses) <= {"pending", "retrying"}


async def test_a_receiver_answering_just_before_its_timeout_does_not_delay_another_organizations_delivery(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """As above, but A's receiver answers (500) just before its 2 s timeout instead of never: its sends hold the
    slots nearly as long, so they count as slow and its queue is held back all the same."""
    waited, _, sent_to_a = await race(hook_client, hook_db, factory, receiver, make_worker,
                                      [Answer(500, delay=1.8)] * BACKLOG, timeout_seconds=2, within=40)
    assert waited < 8, f"B's delivery waited {waited:.1f} s behind A's backlog"
    assert sent_to_a <= 2 * HANGING_AFTER_TIMEOUTS


async def test_a_slow_receivers_backlog_does_not_delay_another_organizations_delivery(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """A's receiver is slow, not hanging: it answers 200 in 0.3 to 0.7 s, well within its 10 s timeout, so its queue
    is never held back. Claims used to take the oldest due deliveries first, so B's delivery, due once A's were
    being sent, waited for all 30 of A's (5 s). Organizations take turns now (claim_order): with every slot A's,
    B's is the next claimed, when the first of A's sends ends. (The answers take different times, so slots free
    one at a time: a claim of one slot must count A's deliveries in flight to choose B's.)"""
    answers = [Answer(200, delay=0.3 + 0.2 * (n % 3)) for n in range(BACKLOG)]
    waited, statuses, sent_to_a = await race(hook_client, hook_db, factory, receiver, make_worker, answers,
                                             timeout_seconds=10, within=30)
    assert sent_to_a <= 2 * HANGING_AFTER_TIMEOUTS, f"A's receiver had been sent {sent_to_a} deliveries before B's"
    assert waited < 2.5, f"B's delivery waited {waited:.1f} s behind A's backlog"
    # Nothing of A's failed or waits for a retry (its outcomes may not all be written yet when B's arrived).
    assert set(statuses) <= {"pending", "success"}, statuses
