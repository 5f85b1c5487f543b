"""`next_retry_at` in the delivery history says when every delivery that will still be sent is tried next:
a new one, one held back behind a hanging receiver, one a worker holds, a retry; null once it will not be."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import httpx
from sqlalchemy import update

from prism.config import Settings
from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.worker import HANGING_AFTER_TIMEOUTS, DeliveryWorker, lease_seconds
from tests.factories import Factory
from tests.test_webhooks_workers import burst
from tests.webhooks_fixtures import BASE, FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver


def at(value: str | None) -> datetime:
    assert value is not None, "next_retry_at is null for a delivery that will still be sent"
    return datetime.fromisoformat(value)


def close_to(value: str | None, expected: datetime) -> bool:
    return abs((at(value) - expected).total_seconds()) < 0.01


async def test_every_delivery_still_to_be_sent_says_when_it_is_tried_next(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=1.5)] * HANGING_AFTER_TIMEOUTS)  # a 1 s timeout: it hangs
    hook = await create_hook(hook_client, ws, receiver.url(path), timeout_seconds=1)
    held = 2
    await burst(hook_db, ws, HANGING_AFTER_TIMEOUTS + held)
    try:
        # New: due at once.
        fresh = await deliveries_of(hook_client, ws, hook["id"])
        assert {d["status"] for d in fresh} == {"pending"}
        assert all(at(d["next_retry_at"]) <= utcnow() for d in fresh), fresh

        # Three sends time out: those are retried after the schedule's first delay, and the receiver's other
        # deliveries, still PENDING, are held back by one timeout. Due a day ago, they are claimed before anything
        # other tests left due in the shared database.
        async with hook_db.write() as s:
            await s.execute(update(WebhookDelivery).where(WebhookDelivery.webhook_id == hook["id"])
                            .values(due_at=utcnow() - timedelta(days=1)))
        clock = FakeClock()
        await make_worker(clock=clock, concurrency=HANGING_AFTER_TIMEOUTS).run_once()
        deliveries = await deliveries_of(hook_client, ws, hook["id"])
        retrying = [d for d in deliveries if d["status"] == "retrying"]
        pending = [d for d in deliveries if d["status"] == "pending"]
        assert len(retrying) == HANGING_AFTER_TIMEOUTS and len(pending) == held, deliveries
        assert all(close_to(d["next_retry_at"], clock.now + timedelta(seconds=60)) for d in retrying), retrying
        assert all(close_to(d["next_retry_at"], clock.now + timedelta(seconds=1)) for d in pending), pending

        # A worker claims the held ones and is lost before it sends them: tried again when its lease ends.
        clock.advance(1)
        claimed = await make_worker(clock=clock).claim(100)
        assert {d["id"] for d in pending} <= {j.delivery_id for j in claimed}
        lease_end = clock.now + timedelta(seconds=lease_seconds(hook_settings, 1))
        deliveries = await deliveries_of(hook_client, ws, hook["id"])
        assert all(close_to(d["next_retry_at"], lease_end) for d in deliveries if d["status"] == "pending")

        # One delivery read on its own says the same.
        one = await hook_client.get(f"{BASE}{hook['id']}/deliveries/{pending[0]['id']}/", headers=ws.headers())
        assert one.status_code == 200 and close_to(one.json()["next_retry_at"], lease_end), one.text

        # Switched off: none of them will be sent, so no time is given. Those no worker holds are FAILED unsent at
        # once; those the lost worker holds stay as they are until a worker reaches them (and makes them FAILED).
        switched = await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=ws.headers())
        assert switched.status_code == 200, switched.text
        deliveries = await deliveries_of(hook_client, ws, hook["id"])
        assert {d["id"] for d in deliveries if d["status"] == "pending"} == {d["id"] for d in pending}
        assert {d["status"] for d in deliveries if d["id"] in {r["id"] for r in retrying}} == {"failed"}
        assert all(d["next_retry_at"] is None for d in deliveries), deliveries
    finally:
        # Its deliveries would otherwise be due in the next tests, ahead of theirs.
        assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=ws.headers())).status_code == 204


async def test_a_test_event_queued_before_its_webhook_is_switched_off_is_not_sent(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """Inactive webhooks never deliver (SPEC.md), test events included: one queued while the webhook was on says
    no time once it is switched off, and a worker reaching it makes it FAILED without sending it."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    try:
        sent = await hook_client.post(f"{BASE}{hook['id']}/test/", headers=ws.headers())
        assert sent.status_code == 202 and at(sent.json()["next_retry_at"]) <= utcnow(), sent.text
        switched = await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=ws.headers())
        assert switched.status_code == 200, switched.text
        [listed] = await deliveries_of(hook_client, ws, hook["id"])
        assert listed["is_test"] is True and listed["next_retry_at"] is None, listed
        await make_worker().run_once()
        [done] = await deliveries_of(hook_client, ws, hook["id"])
        assert receiver.at(path) == []
        assert done["status"] == "failed" and done["error_message"] == "webhook is inactive: not sent", done
        assert done["attempt_count"] == 0 and done["next_retry_at"] is None, done
    finally:
        assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=ws.headers())).status_code == 204


async def test_another_organizations_delivery_is_not_found(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver) -> None:
    """Reading one delivery now looks its webhook up too: still only in the caller's organization."""
    owner, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, owner, receiver.url(unique_path()))
    try:
        await burst(hook_db, owner, 1)
        [delivery] = await deliveries_of(hook_client, owner, hook["id"])
        for url in (f"{BASE}{hook['id']}/deliveries/{delivery['id']}/", f"{BASE}{hook['id']}/deliveries/"):
            answer = await hook_client.get(url, headers=other.headers())
            assert answer.status_code == 404 and answer.json()["error"] == "not_found", answer.text
    finally:
        assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=owner.headers())).status_code == 204
