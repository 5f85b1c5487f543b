"""The webhook management REST API is a door like any other: a persona that denies managing webhooks denies it
there too (it called the webhook service directly, so a restricted agent could point a new webhook at any URL),
and each call is in the ledger."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from prism.models.audit import AuditEntry
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import governed_key, post
from tests.webhooks_fixtures import BASE

NO_WEBHOOKS = {"name": "no-webhooks", "default": "allow", "deny": ["config_manage/governance/webhook/*"]}


async def test_persona_deny_on_webhooks_holds_on_the_rest_door(hook_client: httpx.AsyncClient,
                                                               factory: Factory) -> None:
    ws = await factory.workspace()
    await governed_key(factory, hook_client, ws, "agent", persona=NO_WEBHOOKS)
    body = {"name": "exfil", "url": "https://127.0.0.1:9/hook"}
    # Through the dispatcher the persona refuses it ...
    dispatched = await post(hook_client, ws, "config_manage/governance/webhook/create", body, label="agent")
    assert dispatched.status_code == 403 and dispatched.json()["error"] == "blocked", dispatched.text
    # ... and the same key, on the webhook management door, must be refused alike (SPEC.md: all paths apply
    # the same persona policy).
    rest = await hook_client.post(BASE, json=body, headers=ws.headers("agent"))
    assert rest.status_code == 403, (rest.status_code, rest.text)
    listed = await hook_client.get(BASE, headers=ws.headers("agent"))
    assert listed.status_code == 403, (listed.status_code, listed.text)


async def test_each_call_of_the_webhook_rest_door_is_in_the_ledger(hook_client: httpx.AsyncClient, factory: Factory,
                                                                   hook_db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    created = await hook_client.post(BASE, json={"name": "siem", "url": "https://127.0.0.1:9/hook"},
                                     headers=ws.headers())
    assert created.status_code == 201, created.text
    hook_id = created.json()["id"]
    assert (await hook_client.get(f"{BASE}{hook_id}/", headers=ws.headers())).status_code == 200
    assert (await hook_client.get(f"{BASE}{hook_id}/deliveries/", headers=ws.headers())).status_code == 200
    assert (await hook_client.delete(f"{BASE}{hook_id}/", headers=ws.headers())).status_code == 204
    async with hook_db.read() as session:
        coordinates = (await session.execute(select(AuditEntry.coordinate).where(
            AuditEntry.organization_id == ws.org.id).order_by(AuditEntry.id))).scalars().all()
    assert [c for c in coordinates if "webhook" in c] == [
        "config_manage/governance/webhook/create", "config_manage/governance/webhook/read",
        "config_manage/governance/webhook_delivery/list", "config_manage/governance/webhook/delete"]
