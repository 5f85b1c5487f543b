"""A receiver that answers slowly is held back whatever it answers (docs/webhooks.md): after
HANGING_AFTER_TIMEOUTS sends in a row answered only after half of timeout_seconds or more, its webhook's other due
deliveries are due again one timeout later. A slow 2xx holds the worker's slots as long as a slow 500, so it counts
too. Another organization's delivery, due at the same moment and sent by the same claim, is not held."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import httpx
import pytest
from sqlalchemy import update

from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.worker import HANGING_AFTER_TIMEOUTS, DeliveryWorker
from tests.factories import Factory
from tests.test_webhooks_workers import burst
from tests.webhooks_fixtures import FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver

TIMEOUT_SECONDS = 2
SLOW = 1.3  # more than half of TIMEOUT_SECONDS, well within it
LEFT = 2  # the slow webhook's deliveries beyond the claim


@pytest.mark.parametrize("status", [500, 200])
async def test_slow_answers_hold_back_the_rest_of_their_webhooks_queue(
        status: int, hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    slow_org, other_org = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    slow_path, other_path = unique_path(), unique_path()
    receiver.script(slow_path, [Answer(status, delay=SLOW)] * HANGING_AFTER_TIMEOUTS)
    slow = await create_hook(hook_client, slow_org, receiver.url(slow_path), timeout_seconds=TIMEOUT_SECONDS)
    other = await create_hook(hook_client, other_org, receiver.url(other_path), timeout_seconds=TIMEOUT_SECONDS)
    await burst(hook_db, slow_org, HANGING_AFTER_TIMEOUTS + LEFT)
    await burst(hook_db, other_org, HANGING_AFTER_TIMEOUTS)
    # All due long ago, the slow webhook's first: organizations take turns in the claim, so a claim of
    # 2·HANGING_AFTER_TIMEOUTS - 1 slots takes HANGING_AFTER_TIMEOUTS of the slow webhook's deliveries and all but
    # one of the other organization's, which stays due beside the slow webhook's last LEFT.
    a_day_ago = utcnow() - timedelta(days=1)
    async with hook_db.write() as session:
        for webhook_id, due in ((slow["id"], a_day_ago), (other["id"], a_day_ago + timedelta(minutes=1))):
            await session.execute(update(WebhookDelivery).where(WebhookDelivery.webhook_id == webhook_id)
                                  .values(due_at=due))
    clock = FakeClock()
    await make_worker(clock=clock, concurrency=2 * HANGING_AFTER_TIMEOUTS - 1).run_once()

    assert len(receiver.at(slow_path)) == HANGING_AFTER_TIMEOUTS
    held = [d for d in await deliveries_of(hook_client, slow_org, slow["id"]) if d["status"] == "pending"]
    assert len(held) == LEFT
    # Held back: due one timeout from now, no longer a day ago.
    held_until = clock.now + timedelta(seconds=TIMEOUT_SECONDS)
    assert all(datetime.fromisoformat(d["next_retry_at"]) == held_until for d in held), (status, held)
    [waiting] = [d for d in await deliveries_of(hook_client, other_org, other["id"]) if d["status"] == "pending"]
    assert datetime.fromisoformat(waiting["next_retry_at"]) < clock.now - timedelta(hours=1), waiting
