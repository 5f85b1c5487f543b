"""A receiver's answer holding NUL (U+0000), and outcomes the database refuses: recorded, and nothing sent twice.

PostgreSQL cannot store NUL in text. A worker writes the outcomes of deliveries finishing together in one batch:
one answer holding NUL used to fail the batch, every delivery in it stayed leased, and once the leases ran out
all of them were sent again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import httpx
from sqlalchemy import select

from prism.events.outbox import emit
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.sender import Attempt
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.webhooks_fixtures import DECISION_DATA, FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver

LEASE_SECONDS = 30  # hook_settings


async def decisions(db: Database, ws: Workspace, count: int) -> None:
    async with db.write() as s:
        for _ in range(count):
            await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type="governance.decision.allow",
                       data=DECISION_DATA)


async def test_a_receivers_answer_holding_nul_is_recorded_without_it_and_nothing_is_sent_twice(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    nul_ok, nul_failed, plain = unique_path(), unique_path(), unique_path()
    receiver.script(nul_ok, [Answer(200, body="ok\x00done")] * 3)
    receiver.script(nul_failed, [Answer(500, body="bo\x00om")] * 3)
    hooks = {path: await create_hook(hook_client, ws, receiver.url(path)) for path in (nul_ok, nul_failed, plain)}
    await decisions(hook_db, ws, 3)  # 9 deliveries, written by one worker in one batch of results
    clock = FakeClock()
    worker = make_worker(clock=clock, concurrency=32)
    await worker.run_once()

    recorded = {path: await deliveries_of(hook_client, ws, hook["id"]) for path, hook in hooks.items()}
    assert [(d["status"], d["response_body"]) for d in recorded[nul_ok]] == [("success", "okdone")] * 3
    assert [(d["status"], d["response_body"], d["response_status_code"]) for d in recorded[nul_failed]] == \
        [("retrying", "boom", 500)] * 3
    assert [d["status"] for d in recorded[plain]] == ["success"] * 3

    clock.advance(LEASE_SECONDS + 1)  # any delivery left leased would be due again now (retries are not yet)
    await worker.run_once()
    for path in hooks:
        sent = Counter(r.headers["x-governance-delivery"] for r in receiver.at(path))
        assert len(sent) == 3 and set(sent.values()) == {1}, path


async def test_an_outcome_the_database_refuses_costs_no_other_outcome_of_its_batch(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """The outcome holding NUL here skips the sender (which strips it): PostgreSQL refuses it, SQLite stores it.
    Either way the batch's other outcomes are written, and only the refused one is ever due again."""
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, receiver.url(unique_path()))
    await decisions(hook_db, ws, 3)
    clock = FakeClock()
    worker = make_worker(clock=clock)
    jobs = [job for job in await worker.claim(100) if job.webhook_id == hook["id"]]
    assert len(jobs) == 3
    fine, refused, failed = jobs
    outcomes = {fine.delivery_id: Attempt(True, 200, "fine", None, None),
                refused.delivery_id: Attempt(True, 200, "not storable\x00", None, None),
                failed.delivery_id: Attempt(False, 500, "fine", "HTTP 500: Internal Server Error", None)}
    results = await asyncio.gather(*(worker.record(job, outcomes[job.delivery_id]) for job in jobs),
                                   return_exceptions=True)
    assert results[0] is None and results[2] is None, results

    async with hook_db.read() as s:
        rows = {r.id: r for r in await s.execute(
            select(WebhookDelivery.id, WebhookDelivery.status, WebhookDelivery.claimed_by)
            .where(WebhookDelivery.webhook_id == hook["id"]))}
    assert (rows[fine.delivery_id].status, rows[fine.delivery_id].claimed_by) == ("success", None)
    assert (rows[failed.delivery_id].status, rows[failed.delivery_id].claimed_by) == ("retrying", None)
    clock.advance(LEASE_SECONDS + 1)
    due_again = {job.delivery_id for job in await worker.claim(100) if job.webhook_id == hook["id"]}
    assert due_again <= {refused.delivery_id}
