"""The ledger's events reach the webhooks active when each call is recorded: a webhook created, changed or deleted
between two calls of an organization is honoured on the very next call, and no change to webhooks can make a
governed call fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, select

from prism.models import OutboxEvent
from prism.storage import Database
from prism.webhooks.models import Webhook, WebhookDelivery
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, post
from tests.ledger_support import seal_waiting
from tests.webhooks_fixtures import BASE, create_hook, deliveries_of

URL = "https://127.0.0.1:9/ledger-webhooks"
LEDGER_EVENTS = ["governance.decision.allow", "audit.entry_created"]


async def _governed_call(client: httpx.AsyncClient, ws: Workspace, label: str, db: Database) -> None:
    """A call recorded in the ledger with a governance decision (the key's AI system makes one), and sealed:
    its `audit.entry_created` goes to the webhooks active when it is sealed (on PostgreSQL just after the call)."""
    response = await post(client, ws, "entity_crud/spare_parts/spare_part/list", {}, label=label)
    assert response.status_code == 200, response.text
    await seal_waiting(db, ws.org.id)


async def _agent(factory: Factory, client: httpx.AsyncClient, db: Database) -> tuple[Workspace, dict[str, Any]]:
    """A workspace whose key `agent` records decisions; building it already runs ledgered calls, so the ledger
    has looked at the organization's webhooks (none yet) before the test's first one."""
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", risk_level="high")
    await _governed_call(client, ws, "agent", db)
    return ws, made["ai_system"]


@pytest.fixture(autouse=True)
async def _no_deliveries_left_behind(hook_db: Database) -> AsyncIterator[None]:
    """The webhooks here point nowhere: their deliveries go, so that no worker of a later test tries them."""
    yield
    async with hook_db.write() as session:
        await session.execute(delete(Webhook).where(Webhook.url == URL))


async def _event_types(client: httpx.AsyncClient, db: Database, ws: Workspace, webhook_id: str) -> list[str]:
    """The events delivered for the test's calls: managing the webhook (create, change, list its deliveries) is a
    ledgered call too, whose own `audit.entry_created` is left out."""
    delivered = await deliveries_of(client, ws, webhook_id)
    async with db.read() as session:
        payloads = dict((await session.execute(select(OutboxEvent.id, OutboxEvent.payload).where(
            OutboxEvent.id.in_([d["event_id"] for d in delivered])))).all())
    return sorted(d["event_type"] for d in delivered if "governance/webhook" not in payloads[d["event_id"]])


async def test_a_webhook_created_after_the_organizations_first_call_gets_the_next_calls_events(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws, _system = await _agent(factory, hook_client, hook_db)
    hook = await create_hook(hook_client, ws, URL, events=LEDGER_EVENTS)
    await _governed_call(hook_client, ws, "agent", hook_db)
    assert await _event_types(hook_client, hook_db, ws, hook["id"]) == sorted(LEDGER_EVENTS)


async def test_deleting_a_webhook_the_ledger_has_delivered_to_leaves_the_next_calls_answered(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    kept = await create_hook(hook_client, ws, URL, events=LEDGER_EVENTS)
    dropped = await create_hook(hook_client, ws, URL, events=LEDGER_EVENTS)
    await governed_key(factory, hook_client, ws, "agent", risk_level="high")  # the ledger sees both webhooks
    await _governed_call(hook_client, ws, "agent", hook_db)
    response = await hook_client.delete(f"{BASE}{dropped['id']}/", headers=ws.headers())
    assert response.status_code == 204, response.text
    for _ in range(3):
        await _governed_call(hook_client, ws, "agent", hook_db)
    assert (await _event_types(hook_client, hook_db, ws, kept["id"])).count("governance.decision.allow") == 4
    async with hook_db.read() as session:
        left = (await session.execute(select(func.count()).select_from(WebhookDelivery).where(
            WebhookDelivery.webhook_id == dropped["id"]))).scalar_one()
    assert left == 0


async def test_a_webhook_switched_off_gets_nothing_from_the_next_call_and_again_once_switched_on(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws, _system = await _agent(factory, hook_client, hook_db)
    hook = await create_hook(hook_client, ws, URL, events=["audit.entry_created"])
    await _governed_call(hook_client, ws, "agent", hook_db)
    await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=ws.headers())
    await _governed_call(hook_client, ws, "agent", hook_db)
    assert await _event_types(hook_client, hook_db, ws, hook["id"]) == ["audit.entry_created"]
    await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": True}, headers=ws.headers())
    await _governed_call(hook_client, ws, "agent", hook_db)
    assert await _event_types(hook_client, hook_db, ws, hook["id"]) == ["audit.entry_created"] * 2


async def test_changed_events_and_filters_of_a_webhook_apply_to_the_next_call(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws, system = await _agent(factory, hook_client, hook_db)
    hook = await create_hook(hook_client, ws, URL, events=["governance.decision.allow"],
                             filters={"ai_system_ids": ["another-system"]})
    await _governed_call(hook_client, ws, "agent", hook_db)
    assert await _event_types(hook_client, hook_db, ws, hook["id"]) == []

    response = await hook_client.patch(f"{BASE}{hook['id']}/", json={"filters": {"ai_system_ids": [system["id"]]}},
                                       headers=ws.headers())
    assert response.status_code == 200, response.text
    await _governed_call(hook_client, ws, "agent", hook_db)
    assert await _event_types(hook_client, hook_db, ws, hook["id"]) == ["governance.decision.allow"]

    response = await hook_client.patch(f"{BASE}{hook['id']}/", json={"events": ["audit.entry_created"], "filters": {}},
                                       headers=ws.headers())
    assert response.status_code == 200, response.text
    await _governed_call(hook_client, ws, "agent", hook_db)
    assert await _event_types(hook_client, hook_db, ws, hook["id"]) == [
        "audit.entry_created", "governance.decision.allow"]


async def test_webhooks_created_and_deleted_while_calls_are_recorded_never_fail_a_call(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws, _system = await _agent(factory, hook_client, hook_db)

    async def churn() -> None:
        for _ in range(8):
            hook = await create_hook(hook_client, ws, URL, events=LEDGER_EVENTS)
            await asyncio.sleep(0)
            response = await hook_client.delete(f"{BASE}{hook['id']}/", headers=ws.headers())
            assert response.status_code == 204, response.text

    async def calls() -> list[int]:
        answers = await asyncio.gather(*(
            post(hook_client, ws, "entity_crud/spare_parts/spare_part/list", {}, label="agent") for _ in range(24)))
        return [a.status_code for a in answers]

    _churned, statuses = await asyncio.gather(churn(), calls())
    assert statuses == [200] * 24
