"""A resend is judged by the event it sends again, not only by the webhook it goes to. A person narrows the security
team's webhook to business events; the agent's governed key may then re-point it (a webhook of business events
only is its to manage), but resending one of the governance decisions delivered there before is refused (403
`governed_credential`, a BLOCK decision) and reaches no receiver. And nobody resends an event type the webhook no
longer subscribes to (409 `event_not_subscribed`): its subscription now keeps that event from its receiver."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from prism.events.outbox import emit
from prism.storage import Database
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, ok
from tests.webhooks_fixtures import BASE, DECISION_DATA, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Receiver

SECRET_REASON = "the security team's reason"


async def _delivered_decision(client: httpx.AsyncClient, db: Database, ws: Workspace, receiver: Receiver,
                              make_worker: Callable[..., DeliveryWorker], events: list[str]) -> tuple[str, str]:
    """A webhook of `events`, and the delivery of one governance decision to it: (webhook id, delivery id)."""
    hook = await create_hook(client, ws, receiver.url(unique_path()), events=events)
    async with db.write() as session:
        await emit(session, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type="governance.decision.block",
                   data={**DECISION_DATA, "primary_reason": SECRET_REASON})
    await make_worker().run_once()
    [delivery] = await deliveries_of(client, ws, hook["id"])
    assert delivery["status"] == "success", delivery
    return hook["id"], delivery["id"]


async def test_a_governed_key_cannot_resend_a_governance_event_to_a_receiver_of_its_own(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, hook_client, ws, "agent", persona={"name": "anything-goes", "default": "allow"},
                       risk_level="high")
    hook_id, delivery_id = await _delivered_decision(hook_client, hook_db, ws, receiver, make_worker,
                                                     ["governance.decision.block"])
    narrowed = await hook_client.patch(f"{BASE}{hook_id}/", json={"events": ["ticket.created"]}, headers=ws.headers())
    assert narrowed.status_code == 200, narrowed.text
    agents_path = unique_path()
    agent = ws.headers("agent")
    moved = await hook_client.patch(f"{BASE}{hook_id}/", json={"url": receiver.url(agents_path)}, headers=agent)
    assert moved.status_code == 200, moved.text  # a webhook of business events only: the agent's to manage

    resent = await hook_client.post(f"{BASE}{hook_id}/deliveries/{delivery_id}/resend/", headers=agent)
    assert resent.status_code == 403 and resent.json()["error"] == "governed_credential", resent.text
    await make_worker().run_once()
    assert receiver.at(agents_path) == []
    assert len(await deliveries_of(hook_client, ws, hook_id)) == 1
    decisions = await ok(hook_client, ws, "audit_query/governance/decision/list", {"decision": "BLOCK"})
    assert any(d["primary_reason"].startswith("governed_credential") for d in decisions["items"]), decisions


async def test_nobody_resends_an_event_the_webhook_no_longer_subscribes_to(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    hook_id, delivery_id = await _delivered_decision(hook_client, hook_db, ws, receiver, make_worker,
                                                     ["governance.decision.block", "ticket.created"])
    resend = f"{BASE}{hook_id}/deliveries/{delivery_id}/resend/"
    again = await hook_client.post(resend, headers=ws.headers())  # still subscribed: resent
    assert again.status_code == 202 and again.json()["event_type"] == "governance.decision.block", again.text

    narrowed = await hook_client.patch(f"{BASE}{hook_id}/", json={"events": ["ticket.created"]}, headers=ws.headers())
    assert narrowed.status_code == 200, narrowed.text
    refused = await hook_client.post(resend, headers=ws.headers())
    assert refused.status_code == 409 and refused.json()["error"] == "event_not_subscribed", refused.text
    assert "governance.decision.block" in refused.json()["message"]

    # No events named is every governance event again: the decision may be resent.
    widened = await hook_client.patch(f"{BASE}{hook_id}/", json={"events": None}, headers=ws.headers())
    assert widened.status_code == 200, widened.text
    assert (await hook_client.post(resend, headers=ws.headers())).status_code == 202
