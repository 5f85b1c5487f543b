"""A delivery is sent only if its webhook, as it is when a worker reaches it, still wants it: a subscription
narrowed (events or filters) while a delivery waits to be retried keeps that event from the receiver, whoever
points the webhook elsewhere afterwards; deliveries pending when a webhook is switched off (by a person, or by
Prism after a 410 or too many failures) are FAILED unsent there and then, so switching it back on sends none of
them (docs/webhooks.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import update

from prism.config import Settings
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery
from prism.webhooks.repository import NOT_SENT_INACTIVE, NOT_SENT_UNSUBSCRIBED
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key
from tests.test_webhooks_delivery import at, emit_decision
from tests.webhooks_fixtures import BASE, FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver


async def _retrying(client: httpx.AsyncClient, ws: Workspace, hook: dict[str, Any],
                    worker: DeliveryWorker) -> dict[str, Any]:
    """The webhook's one delivery after a first attempt that failed: RETRYING, due a minute later."""
    await worker.run_once()
    [delivery] = await deliveries_of(client, ws, hook["id"])
    assert delivery["status"] == "retrying", delivery
    return delivery


async def _patched(client: httpx.AsyncClient, ws: Workspace, hook: dict[str, Any], body: dict[str, Any],
                   key: str = "owner") -> None:
    answer = await client.patch(f"{BASE}{hook['id']}/", json=body, headers=ws.headers(key))
    assert answer.status_code == 200, answer.text


async def test_a_decision_waiting_for_its_retry_never_reaches_the_url_a_governed_key_points_the_webhook_at(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, hook_client, ws, "agent", persona={"name": "anything-goes", "default": "allow"},
                       risk_level="high")
    security, agent = unique_path(), unique_path()
    receiver.script(security, [Answer(503)])
    hook = await create_hook(hook_client, ws, receiver.url(security), events=["governance.decision.block"],
                             retry_delay_seconds=60)
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    worker = make_worker(clock=clock)
    delivery = await _retrying(hook_client, ws, hook, worker)
    # A person narrows the webhook to business events; it carries no oversight event now, so the agent's governed
    # key may point it at its own receiver.
    await _patched(hook_client, ws, hook, {"events": ["ticket.created"]})
    await _patched(hook_client, ws, hook, {"url": receiver.url(agent)}, key="agent")
    clock.advance_to(at(delivery["next_retry_at"]))
    await worker.run_once()
    assert receiver.at(agent) == []
    [done] = await deliveries_of(hook_client, ws, hook["id"])
    assert done["status"] == "failed" and done["error_message"] == NOT_SENT_UNSUBSCRIBED, done
    assert done["attempt_count"] == 1 and done["next_retry_at"] is None, done


async def test_a_delivery_its_narrowed_filters_no_longer_let_through_is_neither_sent_nor_resent(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(503)])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=60,
                             filters={"decision_types": ["agent_action"]})
    await emit_decision(hook_db, ws)  # an agent_action decision: it matches
    clock = FakeClock()
    worker = make_worker(clock=clock)
    delivery = await _retrying(hook_client, ws, hook, worker)
    await _patched(hook_client, ws, hook, {"filters": {"decision_types": ["data_access"]}})
    clock.advance_to(at(delivery["next_retry_at"]))
    await worker.run_once()
    assert len(receiver.at(path)) == 1  # the first attempt only
    [done] = await deliveries_of(hook_client, ws, hook["id"])
    assert done["status"] == "failed" and done["error_message"] == NOT_SENT_UNSUBSCRIBED, done
    resent = await hook_client.post(f"{BASE}{hook['id']}/deliveries/{done['id']}/resend/", headers=ws.headers())
    assert resent.status_code == 409 and resent.json()["error"] == "event_not_subscribed", resent.text
    # Widened again, the event may be resent, and is delivered.
    await _patched(hook_client, ws, hook, {"filters": {}})
    resent = await hook_client.post(f"{BASE}{hook['id']}/deliveries/{done['id']}/resend/", headers=ws.headers())
    assert resent.status_code == 202, resent.text
    await worker.run_once()
    assert len(receiver.at(path)) == 2


async def test_a_delivery_pending_when_its_webhook_is_switched_off_is_not_sent_once_it_is_switched_back_on(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(500), Answer(200)])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=60)
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    worker = make_worker(clock=clock)
    delivery = await _retrying(hook_client, ws, hook, worker)
    await _patched(hook_client, ws, hook, {"is_active": False})
    [unsent] = await deliveries_of(hook_client, ws, hook["id"])
    assert unsent["status"] == "failed" and unsent["error_message"] == NOT_SENT_INACTIVE, unsent
    assert unsent["response_status_code"] == 500, "the last attempt's answer is kept"
    await _patched(hook_client, ws, hook, {"is_active": True})
    clock.advance_to(at(delivery["next_retry_at"]))
    await worker.run_once()
    assert len(receiver.at(path)) == 1
    [done] = await deliveries_of(hook_client, ws, hook["id"])
    assert done["status"] == "failed" and done["error_message"] == NOT_SENT_INACTIVE, done


async def test_deliveries_pending_when_prism_switches_a_webhook_off_are_not_sent_once_it_is_switched_back_on(
        hook_client: httpx.AsyncClient, hook_db: Database, hook_settings: Settings, factory: Factory,
        receiver: Receiver, make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(410), Answer(200)])
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await emit_decision(hook_db, ws)
    later = await emit_decision(hook_db, ws)
    clock = FakeClock()
    async with hook_db.write() as s:  # the second is due a minute later: the first's 410 comes before it
        await s.execute(update(WebhookDelivery).where(WebhookDelivery.event_id == later)
                        .values(due_at=clock.now + timedelta(seconds=60)))
    worker = make_worker(clock=clock)
    await worker.run_once()
    switched = (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).json()
    assert switched["is_active"] is False and "410" in switched["deactivated_reason"], switched
    by_event = {d["event_id"]: d for d in await deliveries_of(hook_client, ws, hook["id"])}
    assert by_event[later]["status"] == "failed" and by_event[later]["error_message"] == NOT_SENT_INACTIVE
    await _patched(hook_client, ws, hook, {"is_active": True})
    clock.advance(120)
    await worker.run_once()
    assert len(receiver.at(path)) == 1


async def test_deliveries_ended_unsent_do_not_count_toward_switching_the_webhook_off(
        hook_client: httpx.AsyncClient, hook_db: Database, hook_settings: Settings, factory: Factory,
        receiver: Receiver, make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(503)])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=60,
                             events=["governance.decision.block"])
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    worker = make_worker(hook_settings.model_copy(update={"webhook_deactivate_after_failures": 1}), clock=clock)
    delivery = await _retrying(hook_client, ws, hook, worker)
    await _patched(hook_client, ws, hook, {"events": ["ticket.created"]})
    clock.advance_to(at(delivery["next_retry_at"]))
    await worker.run_once()
    [done] = await deliveries_of(hook_client, ws, hook["id"])
    assert done["status"] == "failed" and done["error_message"] == NOT_SENT_UNSUBSCRIBED, done
    kept = (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).json()
    assert kept["is_active"] is True and kept["deactivated_reason"] is None, kept
