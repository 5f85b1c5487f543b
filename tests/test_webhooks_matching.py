"""Matching and fan-out: which webhooks get a delivery row for an event, written with the event."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from prism.events.outbox import emit
from prism.models import OutboxEvent
from prism.storage import Database
from prism.webhooks.matching import ActiveWebhook, matches
from prism.webhooks.models import WebhookDelivery
from tests.factories import Factory, Workspace
from tests.ledger_support import seal_waiting
from tests.webhooks_fixtures import BASE, create_hook, deliveries_of

URL = "https://127.0.0.1:9/hook"
BLOCK = {"decision_type": "agent_action", "ai_system": {"id": "sys-1", "name": "bot"}, "risk_level": "high"}


def hook(events: tuple[str, ...] = (), **filters: list[str]) -> ActiveWebhook:
    return ActiveWebhook("whk_x", frozenset(events), dict(filters))


@pytest.mark.parametrize(("webhook", "event_type", "data", "expected"), [
    (hook(), "governance.decision.block", BLOCK, True),
    (hook(), "governance.oversight.requested", {}, True),
    (hook(), "invoice.received", {}, False),  # empty events: governance types only
    (hook(("invoice.received",)), "invoice.received", {}, True),
    (hook(("governance.decision.allow",)), "governance.decision.block", BLOCK, False),
    (hook(ai_system_ids=["sys-1"]), "governance.decision.block", BLOCK, True),
    (hook(ai_system_ids=["sys-2"]), "governance.decision.block", BLOCK, False),
    (hook(decision_types=["agent_action"]), "governance.decision.block", BLOCK, True),
    (hook(decision_types=["data_access"]), "governance.decision.block", BLOCK, False),
    (hook(risk_levels=["high", "critical"]), "governance.decision.block", BLOCK, True),
    (hook(risk_levels=["low"]), "governance.decision.block", BLOCK, False),
    (hook(risk_levels=["critical"]), "governance.violation.detected", {"severity": "critical"}, True),
    # AND-ed: every given filter must hold
    (hook(ai_system_ids=["sys-1"], decision_types=["agent_action"], risk_levels=["high"]),
     "governance.decision.block", BLOCK, True),
    (hook(ai_system_ids=["sys-1"], decision_types=["data_access"]), "governance.decision.block", BLOCK, False),
    # an event without the attribute a filter names does not match it
    (hook(ai_system_ids=["sys-1"]), "governance.oversight.requested", {"status": "pending"}, False),
])
def test_matching_matrix(webhook: ActiveWebhook, event_type: str, data: dict[str, Any], expected: bool) -> None:
    assert matches(webhook.events, webhook.filters, event_type, data) is expected


async def _emit(db: Database, ws: Workspace, event_type: str, data: dict[str, Any]) -> str:
    async with db.write() as s:
        return (await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type=event_type,
                           data=data)).id


async def test_fan_out_writes_one_delivery_per_matching_active_webhook(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    everything = await create_hook(hook_client, ws, URL)
    narrowed = await create_hook(hook_client, ws, URL, filters={"ai_system_ids": ["sys-1"]})
    elsewhere = await create_hook(hook_client, ws, URL, filters={"ai_system_ids": ["sys-9"]})
    invoices = await create_hook(hook_client, ws, URL, events=["invoice.received"])
    switched_off = await create_hook(hook_client, ws, URL)
    await hook_client.patch(f"{BASE}{switched_off['id']}/", json={"is_active": False}, headers=ws.headers())
    foreign = await create_hook(hook_client, other, URL)

    event_id = await _emit(hook_db, ws, "governance.decision.block", BLOCK)
    counts = {name: len(await deliveries_of(hook_client, ws, h["id"])) for name, h in (
        ("everything", everything), ("narrowed", narrowed), ("elsewhere", elsewhere), ("invoices", invoices),
        ("switched_off", switched_off))}
    assert counts == {"everything": 1, "narrowed": 1, "elsewhere": 0, "invoices": 0, "switched_off": 0}
    assert await deliveries_of(hook_client, other, foreign["id"]) == []
    [delivery] = await deliveries_of(hook_client, ws, everything["id"])
    assert delivery["event_id"] == event_id and delivery["status"] == "pending" and delivery["is_test"] is False

    await _emit(hook_db, ws, "invoice.received", {"invoice_id": "i1"})
    assert len(await deliveries_of(hook_client, ws, invoices["id"])) == 1
    assert len(await deliveries_of(hook_client, ws, everything["id"])) == 1


async def test_deliveries_roll_back_with_the_event(hook_client: httpx.AsyncClient, hook_db: Database,
                                                   factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    hook_row = await create_hook(hook_client, ws, URL)
    with pytest.raises(RuntimeError):
        async with hook_db.write() as s:
            await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id,
                       event_type="governance.decision.block", data=BLOCK)
            raise RuntimeError("the change that caused the event failed")
    assert await deliveries_of(hook_client, ws, hook_row["id"]) == []


async def _audit_deliveries(db: Database, ws: Workspace) -> int:
    async with db.read() as s:
        return int((await s.execute(select(func.count()).select_from(WebhookDelivery).where(
            WebhookDelivery.organization_id == ws.org.id,
            WebhookDelivery.event_type == "audit.entry_created"))).scalar_one())


async def test_audit_entry_created_is_emitted_only_for_subscribed_organizations(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    subscribed = await factory.workspace(roles=("owner",))
    governance_only = await factory.workspace(roles=("owner",))
    hook_row = await create_hook(hook_client, subscribed, URL, events=["audit.entry_created"])
    await create_hook(hook_client, governance_only, URL)
    for ws in (subscribed, governance_only):
        response = await hook_client.post("/api/v1/dev/call/", headers=ws.headers(), json={
            "name": "prism_whoami", "arguments": {}})
        assert response.status_code == 200, response.text
        await seal_waiting(hook_db, ws.org.id)
    # Managing the webhook is a governed call like any other: its own entries are delivered too.
    delivered = await deliveries_of(hook_client, subscribed, hook_row["id"])
    assert {d["event_type"] for d in delivered} == {"audit.entry_created"}
    assert await _audit_deliveries(hook_db, governance_only) == 0
    async with hook_db.read() as s:
        payloads = (await s.execute(select(OutboxEvent.payload).where(
            OutboxEvent.id.in_([d["event_id"] for d in delivered])))).scalars().all()
        kinds = (await s.execute(select(func.count()).select_from(OutboxEvent).where(
            OutboxEvent.organization_id == governance_only.org.id))).scalar_one()
    assert kinds == 0  # nothing recorded for an organization nobody listens to
    [payload] = [p for p in payloads if '"door":"sandbox"' in p]
    for key in ('"seq":', '"coordinate":', '"outcome":"allowed"', '"door":"sandbox"', '"actor":', '"hash":'):
        assert key in payload
