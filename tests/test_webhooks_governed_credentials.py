"""A governed credential (an agent's: a persona or an AI system applies to it) cannot delete, switch off, re-point,
re-subscribe or re-key a webhook that carries governance, audit or mission events, nor make one: it would blind the
people watching it. It is refused as it is on personas (403 `governed_credential`, a BLOCK decision) on every door;
webhooks of business events stay its to manage, and the same person's ungoverned key manages every webhook."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.keys.service import create_key
from prism.models import User
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import entries, governed_key, ok, post
from tests.oauth_support import bearer, browser, tokens_for
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text
from tests.webhooks_fixtures import BASE, create_hook

HOOK = "config_manage/governance/webhook"
URL, ELSEWHERE = "https://127.0.0.1:9/security", "https://127.0.0.1:9/agent"
SECURITY_EVENTS = ["audit.checkpoint", "governance.decision.block"]
ANYTHING_GOES = {"name": "anything-goes", "default": "allow"}


async def _agent(client: httpx.AsyncClient, factory: Factory) -> Workspace:
    """An owner, and an agent's key (another owner) with a permissive persona and an AI system: nothing but its
    being governed stands between it and the webhooks."""
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona=ANYTHING_GOES, risk_level="high")
    return ws


async def _same_persons_plain_key(db: Database, ws: Workspace, label: str) -> None:
    """A second key of the agent key's user, with neither persona nor AI system."""
    async with db.write() as session:
        user = (await session.execute(select(User).where(User.email == ws.emails["agent"]))).scalar_one()
        minted = await create_key(session, tenant=ws.tenant, user=user, organization=ws.org)
    ws.keys[label] = minted.plaintext


async def _mcp(client: httpx.AsyncClient, ws: Workspace, label: str, operation: str,
               arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    headers = headers_for(ws, label)
    session = await initialize(client, headers)
    answer = await call(client, headers, session, rpc("tools/call", {"name": "prism_config_manage", "arguments": {
        "app": "governance", "entity": "webhook", "operation": operation, "arguments": arguments}}))
    return tool_text(answer)


def _refused(response: httpx.Response) -> bool:
    return response.status_code == 403 and response.json()["error"] == "governed_credential"


async def test_a_governed_key_cannot_blind_the_security_teams_webhook_on_any_door(
        hook_client: httpx.AsyncClient, factory: Factory, hook_db: Database) -> None:
    ws = await _agent(hook_client, factory)
    hook = await create_hook(hook_client, ws, URL, events=SECURITY_EVENTS)
    test = await ok(hook_client, ws, f"{HOOK}/test", {"id": hook["id"]})
    item, agent = f"{BASE}{hook['id']}/", ws.headers("agent")
    rest = [
        await hook_client.delete(item, headers=agent),
        *[await hook_client.patch(item, json=change, headers=agent) for change in (
            {"is_active": False}, {"url": ELSEWHERE}, {"events": ["ticket.created"]}, {"events": None},
            {"filters": {"risk_levels": ["minimal"]}}, {"secret": "whk_secret_" + "a" * 32}, {"name": "renamed"})],
        await hook_client.post(f"{item}test/", headers=agent),
        await hook_client.post(f"{item}deliveries/{test['id']}/resend/", headers=agent),
    ]
    for response in rest:
        assert _refused(response), response.text
        assert set(response.json()) >= {"error", "message"}
    canonical = await post(hook_client, ws, f"{HOOK}/rotate_secret", {"id": hook["id"]}, label="agent")
    assert _refused(canonical), canonical.text
    is_error, body = await _mcp(hook_client, ws, "agent", "delete", {"id": hook["id"]})
    assert is_error and body["error"] == "governed_credential", body
    attempts = len(rest) + 2

    # The webhook is as the owner left it, and each refusal is a BLOCK decision and a refused ledger entry.
    kept = await ok(hook_client, ws, f"{HOOK}/read", {"id": hook["id"]})
    assert (kept["url"], kept["events"], kept["is_active"], kept["name"]) == (URL, SECURITY_EVENTS, True, "Receiver")
    decisions = await ok(hook_client, ws, "audit_query/governance/decision/list",
                         {"decision": "BLOCK", "page_size": 50})
    assert sum(d["primary_reason"].startswith("governed_credential") for d in decisions["items"]) == attempts
    refused = [e for e in await entries(hook_db, ws.org.id) if e.error_code == "governed_credential"]
    assert len(refused) == attempts


@pytest.mark.parametrize("events", [None, [], ["audit.entry_created"], ["ticket.created", "mission.budget_exceeded"],
                                    ["governance.oversight.requested"]])
async def test_a_governed_key_cannot_subscribe_a_webhook_to_oversight_events(
        hook_client: httpx.AsyncClient, factory: Factory, events: list[str] | None) -> None:
    """No events named means every governance event (SPEC.md "Webhook"): that is an oversight webhook too."""
    ws = await _agent(hook_client, factory)
    body: dict[str, Any] = {"name": "mine", "url": ELSEWHERE}
    if events is not None:
        body["events"] = events
    created = await hook_client.post(BASE, json=body, headers=ws.headers("agent"))
    assert _refused(created), created.text
    # Nor turn a webhook of its own into one.
    own = (await hook_client.post(BASE, json={**body, "events": ["ticket.created"]}, headers=ws.headers("agent")))
    assert own.status_code == 201, own.text
    changed = await post(hook_client, ws, f"{HOOK}/update", {"id": own.json()["id"], "events": events},
                         label="agent")
    assert _refused(changed), changed.text
    assert (await ok(hook_client, ws, f"{HOOK}/list", {}))["total"] == 1


async def test_a_governed_key_manages_webhooks_of_business_events(hook_client: httpx.AsyncClient,
                                                                   factory: Factory) -> None:
    ws = await _agent(hook_client, factory)
    agent = ws.headers("agent")
    created = await hook_client.post(BASE, json={"name": "tickets", "url": URL, "events": ["ticket.created"]},
                                     headers=agent)
    assert created.status_code == 201, created.text
    item = f"{BASE}{created.json()['id']}/"
    moved = await hook_client.patch(item, json={"url": ELSEWHERE, "is_active": False}, headers=agent)
    assert moved.status_code == 200 and moved.json()["url"] == ELSEWHERE, moved.text
    rotated = await post(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created.json()["id"]}, label="agent")
    assert rotated.status_code == 200, rotated.text
    # Switched off, it sends no test event (409 webhook_inactive, whoever asks); switched on by the agent, it does.
    assert (await hook_client.post(f"{item}test/", headers=agent)).status_code == 409
    assert (await hook_client.patch(item, json={"is_active": True}, headers=agent)).status_code == 200
    assert (await hook_client.post(f"{item}test/", headers=agent)).status_code == 202
    is_error, body = await _mcp(hook_client, ws, "agent", "delete", {"id": created.json()["id"]})
    assert not is_error, body


async def test_the_same_persons_ungoverned_key_still_manages_the_security_webhook(
        hook_client: httpx.AsyncClient, factory: Factory, hook_db: Database) -> None:
    ws = await _agent(hook_client, factory)
    await _same_persons_plain_key(hook_db, ws, "person")
    hook = await create_hook(hook_client, ws, URL, events=SECURITY_EVENTS)
    item = f"{BASE}{hook['id']}/"
    switched = await hook_client.patch(item, json={"is_active": False, "url": ELSEWHERE}, headers=ws.headers("person"))
    assert switched.status_code == 200 and switched.json()["is_active"] is False, switched.text
    rotated = await post(hook_client, ws, f"{HOOK}/rotate_secret", {"id": hook["id"]}, label="person")
    assert rotated.status_code == 200, rotated.text
    is_error, body = await _mcp(hook_client, ws, "person", "delete", {"id": hook["id"]})
    assert not is_error, body
    assert (await hook_client.get(item, headers=ws.headers("person"))).status_code == 404


async def test_a_governed_key_of_another_tenant_finds_no_webhook_here(hook_client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws = await _agent(hook_client, factory)
    other = await _agent(hook_client, factory)
    business = await create_hook(hook_client, ws, URL, events=["ticket.created"])
    security = await create_hook(hook_client, ws, URL, events=SECURITY_EVENTS)
    for hook in (business, security):
        # Not found, as for any other key: the refusal for governed keys says nothing about another tenant's hooks.
        gone = await hook_client.delete(f"{BASE}{hook['id']}/", headers=other.headers("agent"))
        assert gone.status_code == 404 and gone.json()["error"] == "not_found", gone.text
    assert (await ok(hook_client, ws, f"{HOOK}/list", {}))["total"] == 2


async def test_an_oauth_token_whose_client_is_tied_to_an_ai_system_cannot_delete_it_either(
        hook_app: object, hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(hook_app, ws.host) as c:
        tokens = await tokens_for(c, ws)
    token = {"Host": ws.host, **bearer(tokens["access_token"])}
    hook = await create_hook(hook_client, ws, URL, events=SECURITY_EVENTS)
    # Before the organization ties the client, the owner's token is a person's and may switch it off.
    switched = await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=token)
    assert switched.status_code == 200, switched.text
    system = await ok(hook_client, ws, "config_manage/governance/ai_system/create",
                      {"name": "assistant", "risk_level": "limited"})
    await ok(hook_client, ws, "config_manage/governance/ai_system/attach",
             {"client_id": tokens["client"]["client_id"], "ai_system_id": system["id"]})
    refused = await hook_client.delete(f"{BASE}{hook['id']}/", headers=token)
    assert _refused(refused), refused.text
    assert (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers())).status_code == 200
