"""Delivery to a real local HTTPS receiver: signature, headers, the state table, retries, deactivation."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import httpx
import pytest
import stripe

from prism.events.outbox import emit
from prism.storage import Database
from prism.webhooks.signing import USER_AGENT, signature_header
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.webhooks_fixtures import BASE, FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Answer, Receiver

DECISION = {"decision_id": "d1", "decision": "BLOCK", "decision_type": "agent_action", "primary_reason": "r",
            "ai_system": {"id": "sys-1", "name": "Claims bot"}, "policies_evaluated": 3, "policies_violated": 1,
            "latency_ms": 4, "trace_id": "t1"}


async def emit_decision(db: Database, ws: Workspace, data: dict[str, object] | None = None,
                        event_type: str = "governance.decision.block") -> str:
    async with db.write() as s:
        event = await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type=event_type,
                           data=data or DECISION)
    return event.id


def at(value: str | None) -> datetime:
    assert value is not None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_delivery_is_signed_verifiable_with_stripe_and_carries_every_header(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path), custom_headers={"Authorization": "Bearer rx"})
    event_id = await emit_decision(hook_db, ws)
    assert await make_worker().run_once() >= 1
    [got] = receiver.at(path)
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    headers = got.headers
    assert headers["x-governance-event"] == "governance.decision.block"
    assert headers["x-governance-delivery"] == delivery["id"]
    assert headers["user-agent"] == USER_AGENT and headers["content-type"] == "application/json"
    assert headers["authorization"] == "Bearer rx"
    body = got.body.decode()
    assert body.startswith('{"api_version":"2024-12-31","data":') and " " not in body.replace("Claims bot", "")
    assert f'"event_id":"{event_id}"' in body
    stripe.WebhookSignature.verify_header(body, headers["x-governance-signature"], hook["secret"], tolerance=300)
    with pytest.raises(stripe.SignatureVerificationError):  # one byte changed
        stripe.WebhookSignature.verify_header(body.replace("BLOCK", "BLOCk"), headers["x-governance-signature"],
                                              hook["secret"], tolerance=300)
    stale = signature_header([hook["secret"]], got.body, int(time.time()) - 301)
    with pytest.raises(stripe.SignatureVerificationError):  # a replay outside the tolerance
        stripe.WebhookSignature.verify_header(body, stale, hook["secret"], tolerance=300)
    assert delivery["status"] == "success" and delivery["attempt_count"] == 1
    assert delivery["response_status_code"] == 200 and delivery["delivered_at"] and delivery["next_retry_at"] is None


async def test_four_failures_then_success_on_attempt_five_with_delays_1_2_4_8(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(500, "boom " * 400)] * 4 + [Answer(200)])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=1)
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    worker = make_worker(clock=clock)
    delays = []
    for attempt in range(1, 6):
        attempted_at = clock.now
        await worker.run_once()
        [delivery] = await deliveries_of(hook_client, ws, hook["id"])
        assert delivery["attempt_count"] == attempt
        if attempt < 5:
            assert delivery["status"] == "retrying" and delivery["response_status_code"] == 500
            assert delivery["error_message"] == "HTTP 500: Internal Server Error"
            assert len(delivery["response_body"]) == 1000
            due = at(delivery["next_retry_at"])
            delays.append(round((due - attempted_at).total_seconds()))
            clock.advance(0.5)
            await worker.run_once()  # not due yet: nothing is sent early
            assert len(receiver.at(path)) == attempt
            clock.advance_to(due)
    assert delays == [1, 2, 4, 8]
    assert delivery["status"] == "success" and delivery["next_retry_at"] is None and delivery["error_message"] is None


async def test_always_500_is_failed_after_five_attempts(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(500)] * 10)
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=1)
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    worker = make_worker(clock=clock)
    for _ in range(8):
        await worker.run_once()
        clock.advance(20)
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "failed" and delivery["attempt_count"] == 5 and delivery["next_retry_at"] is None
    assert len(receiver.at(path)) == 5


async def test_max_retries_zero_means_a_single_attempt(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(503)])
    hook = await create_hook(hook_client, ws, receiver.url(path), max_retries=0)
    await emit_decision(hook_db, ws)
    await make_worker().run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "failed" and delivery["attempt_count"] == 1


async def test_a_hanging_receiver_is_a_failed_attempt_at_the_timeout(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(200, delay=5)])
    hook = await create_hook(hook_client, ws, receiver.url(path), timeout_seconds=1)
    await emit_decision(hook_db, ws)
    started = time.monotonic()
    await make_worker().run_once()
    assert 0.9 < time.monotonic() - started < 3
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "retrying" and delivery["response_status_code"] is None
    assert "timed out after 1 s" in delivery["error_message"]


async def test_retry_after_on_429_pushes_the_next_attempt_later_within_bounds(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(429, headers={"Retry-After": "120"}), Answer(503, headers={"Retry-After": "999999"})])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=1)
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    worker = make_worker(clock=clock)
    start = clock.now
    await worker.run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert round((at(delivery["next_retry_at"]) - start).total_seconds()) == 120
    clock.advance(120)
    second = clock.now
    await worker.run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert round((at(delivery["next_retry_at"]) - second).total_seconds()) == 3600  # the ceiling


async def test_a_retry_after_that_is_not_ascii_digits_falls_back_to_the_schedule(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """"²" (sent as its UTF-8 bytes) passes str.isdigit(), and float() refuses it."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(429, headers={"Retry-After": "²".encode().decode("latin-1")})])
    hook = await create_hook(hook_client, ws, receiver.url(path), retry_delay_seconds=1)
    await emit_decision(hook_db, ws)
    clock = FakeClock()
    start = clock.now
    await make_worker(clock=clock).run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "retrying" and delivery["response_status_code"] == 429, delivery
    assert round((at(delivery["next_retry_at"]) - start).total_seconds()) == 1  # the schedule's first delay


async def test_410_gone_fails_the_delivery_and_deactivates_the_webhook(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(410)])
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await emit_decision(hook_db, ws)
    await make_worker().run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "failed" and delivery["attempt_count"] == 1
    read = (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).json()
    assert read["is_active"] is False and "410" in read["deactivated_reason"]
    await emit_decision(hook_db, ws)  # an inactive webhook gets no new deliveries
    assert len(await deliveries_of(hook_client, ws, hook["id"])) == 1


async def test_consecutive_failed_deliveries_deactivate_the_webhook(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], hook_settings: object) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    receiver.script(path, [Answer(500)] * 3)
    hook = await create_hook(hook_client, ws, receiver.url(path), max_retries=0)
    strict = hook_settings.model_copy(update={"webhook_deactivate_after_failures": 2})  # type: ignore[attr-defined]
    worker = make_worker(strict)
    await emit_decision(hook_db, ws)
    await worker.run_once()
    assert (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).json()["is_active"] is True
    await emit_decision(hook_db, ws)
    await worker.run_once()
    read = (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).json()
    assert read["is_active"] is False and read["deactivated_reason"] == "2 consecutive deliveries failed"
    again = await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": True}, headers=ws.headers())
    assert again.json()["is_active"] is True and again.json()["deactivated_reason"] is None


async def test_deliveries_pending_when_a_webhook_is_switched_off_are_not_sent(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    await emit_decision(hook_db, ws)
    await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=ws.headers())
    await make_worker().run_once()
    assert receiver.at(path) == []
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert delivery["status"] == "failed" and "inactive" in delivery["error_message"]


async def test_an_inactive_webhook_refuses_a_test_event(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    """Inactive webhooks never deliver (SPEC.md): a test event to one is a state conflict, 409, and nothing is
    queued; switched back on, the same request is accepted."""
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, receiver.url(unique_path()))
    await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=ws.headers())
    refused = await hook_client.post(f"{BASE}{hook['id']}/test/", headers=ws.headers())
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"] == "webhook_inactive" and "is_active" in refused.json()["message"], refused.text
    assert await deliveries_of(hook_client, ws, hook["id"]) == []
    await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": True}, headers=ws.headers())
    accepted = await hook_client.post(f"{BASE}{hook['id']}/test/", headers=ws.headers())
    assert accepted.status_code == 202 and accepted.json()["is_test"] is True, accepted.text


async def test_test_event_and_resend_run_the_real_pipeline(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path))
    started = await hook_client.post(f"{BASE}{hook['id']}/test/", headers=ws.headers())
    assert started.status_code == 202 and started.json()["is_test"] is True
    await make_worker().run_once()
    resent = await hook_client.post(f"{BASE}{hook['id']}/deliveries/{started.json()['id']}/resend/",
                                    headers=ws.headers())
    assert resent.status_code == 202 and resent.json()["id"] != started.json()["id"]
    await make_worker().run_once()
    first, second = receiver.at(path)
    assert first.body == second.body  # the same recorded bytes
    assert first.headers["x-governance-delivery"] != second.headers["x-governance-delivery"]
    stripe.WebhookSignature.verify_header(first.body.decode(), first.headers["x-governance-signature"],
                                          hook["secret"], tolerance=300)
    shown = await hook_client.get(f"{BASE}{hook['id']}/deliveries/{started.json()['id']}/", headers=ws.headers())
    assert shown.json()["status"] == "success" and shown.json()["is_test"] is True
    listed = (await hook_client.get(f"{BASE}{hook['id']}/deliveries/", params={"status": "success"},
                                    headers=ws.headers())).json()
    assert listed["count"] == 2 and [d["id"] for d in listed["results"]][1] == started.json()["id"]
