"""Workers: connect-time SSRF guard, redirects, leases, several workers, a killed worker, the in-process one."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import httpx
from sqlalchemy import func, insert, select, text

from prism.app import create_app
from prism.config import Settings
from prism.events.outbox import emit
from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.webhooks.matching import new_delivery_id
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.sender import Attempt
from prism.webhooks.tasks import RunningWorker, stop_all
from prism.webhooks.worker import OUTCOMES_WAITING_PER_SLOT, DeliveryWorker, lease_seconds
from tests.factories import Factory, Workspace
from tests.processes import clean_env, prism_command
from tests.webhooks_fixtures import BASE, DECISION_DATA, FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver, TlsFiles


async def burst(db: Database, ws: Workspace, count: int) -> list[str]:
    ids = []
    async with db.write() as s:
        for _ in range(count):
            ids.append((await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id,
                                   event_type="governance.decision.allow", data=DECISION_DATA)).id)
    return ids


async def test_dns_rebinding_to_loopback_is_refused_at_connect_time(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    """Saved while the name was acceptable; at delivery time it resolves to 127.0.0.1 and is refused."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path, host="localhost"))
    await burst(hook_db, ws, 1)
    guarded = hook_settings.model_copy(update={"webhook_allow_private_networks": False})
    await make_worker(guarded).run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert receiver.at(path) == []
    assert delivery["status"] == "retrying" and delivery["response_status_code"] is None
    # The delivery's record says the name is not public, not where it points (the customer reads it).
    assert "connection refused by Prism: localhost is not a public address" in delivery["error_message"]
    assert "127.0.0.1" not in delivery["error_message"] and "loopback" not in delivery["error_message"]


async def test_a_literal_loopback_address_is_refused_at_connect_time(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    """An address written in the URL never reaches a resolver: it is vetted before anything is sent."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path, host="127.0.0.1"))
    await burst(hook_db, ws, 1)
    guarded = hook_settings.model_copy(update={"webhook_allow_private_networks": False})
    await make_worker(guarded).run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert receiver.at(path) == []
    assert delivery["status"] == "retrying" and delivery["response_status_code"] is None
    assert "connection refused by Prism" in delivery["error_message"] and "loopback" in delivery["error_message"]


async def test_a_redirect_is_not_followed(hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory,
                                          receiver: Receiver, make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path, target = unique_path(), unique_path()
    receiver.script(path, [Answer(307, headers={"Location": receiver.url(target)})])
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await burst(hook_db, ws, 1)
    await make_worker().run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert receiver.at(target) == [] and len(receiver.at(path)) == 1
    assert delivery["status"] == "retrying" and delivery["response_status_code"] == 307
    assert "redirects are not followed" in delivery["error_message"]


async def test_a_running_worker_never_has_more_sends_in_flight_than_its_concurrency(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=0.3)] * 20)
    await create_hook(hook_client, ws, receiver.url(path))
    await burst(hook_db, ws, 20)
    worker = make_worker(concurrency=4)
    running = asyncio.create_task(worker.run())
    try:
        arrivals = [r.at for r in await receiver.wait_for(path, 20, within=30)]
    finally:
        running.cancel()
    # Each answer takes 0.3 s: requests arriving within 0.3 s of one another were in flight together.
    in_flight = max(sum(1 for b in arrivals if a <= b < a + 0.29) for a in arrivals)
    assert in_flight <= 4


async def test_stopping_a_worker_lets_its_claimed_deliveries_finish_and_be_recorded(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """A stop (Ctrl-C, SIGTERM, the server shutting down) while a receiver is still answering: the delivery is
    recorded as sent, not left claimed for its lease to run out and sent a second time."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=1.0)])
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await burst(hook_db, ws, 1)
    running = RunningWorker(make_worker())
    await receiver.wait_for(path, 1, within=30)  # the send is in flight, its answer a second away
    await running.stop()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "success" and delivery["response_status_code"] == 200, delivery
    assert len(receiver.at(path)) == 1


async def test_a_stop_never_waits_longer_than_its_grace_for_a_slow_receiver(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=20.0)])
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await burst(hook_db, ws, 1)
    running = RunningWorker(make_worker())
    await receiver.wait_for(path, 1, within=30)
    started = time.monotonic()
    await running.stop(grace_seconds=0.5)
    assert time.monotonic() - started < 5
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "pending"  # unfinished: sent again once its lease has run out


async def test_a_stop_waiting_for_a_claim_and_a_send_takes_one_grace_in_all(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """A worker stopped while its claim waits for the database and a send is in flight: the grace is one budget
    for both, not a grace for the claim and another for the send."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=20.0)] * 2)
    hook = await create_hook(hook_client, ws, receiver.url(path))
    [event_id] = await burst(hook_db, ws, 1)
    running = RunningWorker(make_worker())
    try:
        await receiver.wait_for(path, 1, within=30)  # in flight for 20 s
        soon = utcnow() + timedelta(seconds=0.5)
        async with hook_db.write() as s:  # a second delivery, due while the database is held below
            await s.execute(insert(WebhookDelivery).values(
                id=new_delivery_id(), organization_id=ws.org.id, webhook_id=hook["id"], event_id=event_id,
                event_type="governance.decision.allow", status="pending", attempt_count=0, response_body="",
                is_test=False, due_at=soon, created_at=soon))
        async with hook_db.write() as s:  # SQLite: this process's one writer; PostgreSQL: the queue's table
            if not hook_db.is_sqlite:
                await s.execute(text("LOCK TABLE webhook_deliveries IN ACCESS EXCLUSIVE MODE"))
            await asyncio.sleep(1.5)  # the second delivery is due: the worker's claim waits for the database
            started = time.monotonic()
            await running.stop(grace_seconds=1.5)
            took = time.monotonic() - started
        assert took < 2.5, f"the stop took {took:.1f} s for a grace of 1.5 s"
    finally:
        assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=ws.headers())).status_code == 204


async def test_stopping_several_workers_takes_one_grace_not_one_each(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """`prism worker --workers N` stops its loops together: within the grace a container runtime allows."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=20.0)] * 3)
    hook = await create_hook(hook_client, ws, receiver.url(path))
    try:
        running = []
        for sent in range(1, 4):  # each worker has one send in flight
            running.append(RunningWorker(make_worker(concurrency=1)))
            await burst(hook_db, ws, 1)
            await receiver.wait_for(path, sent, within=30)
        started = time.monotonic()
        await stop_all(running, grace_seconds=1.0)
        took = time.monotonic() - started
        assert took < 2.0, f"stopping three workers took {took:.1f} s for a grace of 1 s"
    finally:
        assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=ws.headers())).status_code == 204


async def test_a_crashed_workers_claims_are_delivered_after_the_lease(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await burst(hook_db, ws, 3)
    clock = FakeClock()
    crashed = make_worker(clock=clock)
    claimed = await crashed.claim(100)  # claimed, then the worker "dies" before sending anything
    assert {j.webhook_id for j in claimed} >= {hook["id"]}
    survivor = make_worker(clock=clock)
    await survivor.run_once()
    assert receiver.at(path) == []  # still leased to the dead worker
    clock.advance(lease_seconds(hook_settings, hook["timeout_seconds"]) + 1)  # the lease has passed
    # Deliveries other tests left in the shared database are due by then too, some before these: claimed first.
    for _ in range(20):
        if await survivor.run_once() == 0 or len(receiver.at(path)) == 3:
            break
    assert len(receiver.at(path)) == 3
    assert {d["status"] for d in await deliveries_of(hook_client, ws, hook["id"])} == {"success"}


async def test_an_outcome_is_not_written_once_its_claim_was_taken_again_even_by_the_same_worker(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    """A worker whose lease ran out and who claimed the delivery again holds a new claim: the first claim's late
    outcome must not end the second (it would drop its lease while that send is still going on)."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await burst(hook_db, ws, 1)
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    clock = FakeClock()
    worker = make_worker(clock=clock)
    [first] = [j for j in await worker.claim(100) if j.delivery_id == delivery["id"]]
    clock.advance(lease_seconds(hook_settings, hook["timeout_seconds"]) + 1)  # the first claim has run out
    [second] = [j for j in await worker.claim(100) if j.delivery_id == delivery["id"]]
    answered = Attempt(True, 200, "ok", None, None)
    # Late, that claim no longer held: neither a success (written in one statement) nor a failure (one by one).
    await worker.record(first, answered)
    await worker.record(first, Attempt(False, 500, "", "HTTP 500: Internal Server Error", None))
    async with hook_db.read() as s:
        row = (await s.execute(select(WebhookDelivery).where(WebhookDelivery.id == delivery["id"]))).scalar_one()
    assert row.status == "pending" and row.claimed_by == worker.worker_id and row.claimed_until is not None
    assert row.claimed_until > clock.now  # still the second claim's lease
    await worker.record(second, answered)
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "success" and delivery["attempt_count"] == 1


async def test_three_workers_deliver_500_due_deliveries_exactly_once(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    [event_id] = await burst(hook_db, ws, 1)
    now = utcnow()
    async with hook_db.write() as s:  # 499 more due deliveries of the same event, written at once
        await s.execute(insert(WebhookDelivery), [
            {"id": new_delivery_id(), "organization_id": ws.org.id, "webhook_id": hook["id"], "event_id": event_id,
             "event_type": "governance.decision.allow", "status": "pending", "attempt_count": 0,
             "response_body": "", "is_test": False, "due_at": now, "created_at": now} for _ in range(499)])
    workers = [make_worker(concurrency=20) for _ in range(3)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        await receiver.wait_for(path, 500, within=120)
        await asyncio.sleep(0.5)  # anything sent twice would have arrived by now
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    sent = Counter(r.headers["x-governance-delivery"] for r in receiver.at(path))
    assert len(sent) == 500 and set(sent.values()) == {1}
    async with hook_db.read() as s:
        statuses = dict((await s.execute(select(WebhookDelivery.status, func.count()).where(
            WebhookDelivery.webhook_id == hook["id"]).group_by(WebhookDelivery.status))).all())
    assert statuses == {"success": 500}


async def test_the_in_process_worker_sends_a_fresh_event_within_a_second(
        hook_settings: Settings, factory: Factory, receiver: Receiver) -> None:
    """Polling is set to a minute: only the commit wake-up can make this fast."""
    settings = hook_settings.model_copy(update={"webhook_worker_in_process": True, "webhook_poll_seconds": 60.0})
    application = create_app(settings)
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    async with application.router.lifespan_context(application), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://localhost") as client:
        assert application.state.webhook_worker is not None
        await asyncio.sleep(0.2)  # the worker's first poll is behind it
        await create_hook(client, ws, receiver.url(path))
        started = time.monotonic()
        await burst(application.state.db, ws, 1)
        await receiver.wait_for(path, 1, within=5)
        assert time.monotonic() - started < 1.0


async def test_killing_a_worker_process_mid_burst_loses_no_event(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        hook_settings: Settings, tls: TlsFiles) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=0.005)] * 1000)
    # A short timeout keeps the dead worker's leases (timeout + margin) short.
    hook = await create_hook(hook_client, ws, receiver.url(path), timeout_seconds=1)
    env = clean_env(
        PRISM_DATABASE_URL=hook_settings.database_url, PRISM_SECRET_KEY_FILE=hook_settings.secret_key_file,
        PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", PRISM_WEBHOOK_CA_BUNDLE=str(tls.ca),
        PRISM_WEBHOOK_LEASE_SECONDS="2", PRISM_WEBHOOK_POLL_SECONDS="0.1", PRISM_LOG_LEVEL="warning",
        **({"PRISM_SECRET_KEY": hook_settings.secret_key} if hook_settings.secret_key else {}))

    async def start() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(*prism_command(), "worker", env=env,
                                                    stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.DEVNULL)

    event_ids = await burst(hook_db, ws, 1000)
    first = await start()
    try:
        await receiver.wait_for(path, 200, within=60)
        os.kill(first.pid, signal.SIGKILL)
        await first.wait()
        at_kill = len(receiver.at(path))
        assert at_kill < 1000, "the burst finished before the kill; nothing was tested"
        second = await start()
        try:
            await receiver.wait_for(path, 1000, within=120)
            await asyncio.sleep(2.5)  # a lease passing late would show up as extra sends
        finally:
            second.kill()
            await second.wait()
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    delivered = Counter(r.headers["x-governance-delivery"] for r in receiver.at(path))
    events = {r.body.decode().split('"event_id":"', 1)[1].split('"', 1)[0] for r in receiver.at(path)}
    assert events == set(event_ids)  # every event delivered, none lost
    duplicates = sum(n - 1 for n in delivered.values())
    # Only deliveries in flight at the kill can arrive twice: those the dead worker was sending, or had sent
    # without its outcome written yet — at most OUTCOMES_WAITING_PER_SLOT per slot.
    assert duplicates <= hook_settings.webhook_worker_concurrency * OUTCOMES_WAITING_PER_SLOT
    # The second worker was killed too: what it held would be due in the next tests, ahead of their deliveries.
    assert (await hook_client.delete(f"{BASE}{hook['id']}/", headers=ws.headers())).status_code == 204


async def test_a_lease_set_below_the_timeout_never_lets_a_second_worker_send_during_an_attempt(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: Settings) -> None:
    """PRISM_WEBHOOK_LEASE_SECONDS at 0.5 s, a receiver answering after 2.5 s of a 4 s timeout, two workers polling:
    a lease of the setting alone would run out mid-send and the other worker would send the event again at the same
    time. Each claim lasts at least the webhook's timeout plus a margin, so the receiver sees one request."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=2.5)] * 3)
    hook = await create_hook(hook_client, ws, receiver.url(path), timeout_seconds=4)
    await burst(hook_db, ws, 1)
    short_lease = hook_settings.model_copy(update={"webhook_lease_seconds": 0.5})
    tasks = [asyncio.create_task(make_worker(short_lease).run()) for _ in range(2)]
    try:
        await receiver.wait_for(path, 1, within=30)
        await asyncio.sleep(4 + 1)  # one attempt's whole time, and a poll past it
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert len(receiver.at(path)) == 1
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "success" and delivery["attempt_count"] == 1, delivery
