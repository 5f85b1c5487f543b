"""The console for a tenant's own roles (custom permission sets): what a role may do, the page lets it do
completely, and what it may not read it is not shown."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import select

from prism.models import Membership, Role, User
from prism.storage import Database
from prism.webhooks.models import Webhook
from tests.factories import Factory, Workspace
from tests.oauth_support import browser, field, sign_in

pytestmark = pytest.mark.engine_independent

RECEIVER = "https://93.184.215.14/hook"  # a public address literal: no DNS, nothing is sent


async def _give_role(db: Database, ws: Workspace, label: str, role_name: str, permissions: list[str]) -> None:
    async with db.write() as s:
        role = Role(tenant_id=ws.tenant.id, name=role_name, permissions=permissions)
        s.add(role)
        await s.flush()
        user = (await s.execute(select(User).where(User.email == ws.emails[label]))).scalar_one()
        membership = (await s.execute(select(Membership).where(
            Membership.user_id == user.id, Membership.organization_id == ws.org.id))).scalar_one()
        membership.role_id = role.id


async def _hooks(db: Database, ws: Workspace) -> list[Webhook]:
    async with db.read() as s:
        return list((await s.execute(select(Webhook).where(Webhook.organization_id == ws.org.id))).scalars())


async def test_a_role_that_creates_webhooks_without_listing_them_is_shown_the_new_secret_once(
        app: Any, factory: Factory, db: Database) -> None:
    """`governance.add_webhook` without `governance.view_webhook`: the create handler runs and commits, so the
    answering page must show the signing secret (the only place it ever appears), as the key page does for a
    role that mints without listing (docs/governance.md "API keys")."""
    ws = await factory.workspace(roles=("owner", "member"))
    await _give_role(db, ws, "member", "hook-maker", ["governance.add_webhook"])
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        # The webhooks list is refused to this role; the session's token is on the key dashboard too.
        token = field((await c.get("/keys/")).text, "csrf_token")
        made = await c.post("/console/webhooks/", params=org, data={
            "csrf_token": token, "name": "receiver", "url": RECEIVER})
    created = await _hooks(db, ws)
    assert len(created) == 1  # the webhook exists: the handler ran and committed
    assert made.status_code == 201, (made.status_code, made.text[-600:])
    assert re.search(r'id="new-secret-value">whk_secret_', made.text), made.text[-600:]


async def test_a_role_that_rotates_a_secret_without_reading_webhooks_is_shown_the_new_secret(
        app: Any, factory: Factory, db: Database) -> None:
    """`governance.change_webhook` without `governance.view_webhook`: rotate_secret replaces the signing secret
    and commits; if the answering page does not show it, nobody can ever learn the secret the webhook now
    signs with, and the receiver rejects every delivery from then on."""
    ws = await factory.workspace(roles=("owner", "member"))
    await _give_role(db, ws, "member", "hook-rotator", ["governance.change_webhook"])
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        token = field((await c.get("/console/webhooks/", params=org)).text, "csrf_token")
        made = await c.post("/console/webhooks/", params=org, data={
            "csrf_token": token, "name": "receiver", "url": RECEIVER})
        assert made.status_code == 201, made.text[-600:]
    (hook,) = await _hooks(db, ws)
    sealed_before = hook.sealed
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        token = field((await c.get("/keys/")).text, "csrf_token")
        rotated = await c.post(f"/console/webhooks/{hook.id}/rotate/", params=org, data={"csrf_token": token})
    (after,) = await _hooks(db, ws)
    assert after.sealed != sealed_before  # the secret was replaced
    assert rotated.status_code == 200, (rotated.status_code, rotated.text[-600:])
    assert re.search(r'id="new-secret-value">whk_secret_', rotated.text), rotated.text[-600:]


GATED = {"name": "gated-vendors", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"]}


async def test_the_inbox_state_is_refused_to_a_role_that_may_not_read_oversight_requests(
        app: Any, client: Any, factory: Factory, db: Database) -> None:
    """The console "has no privileges of its own" (docs/governance.md "The console"): a role without
    `governance.view_oversight_request` is refused the inbox, and must be refused its polling endpoint too,
    which otherwise tells it how many calls wait for a decision and when the newest was asked."""
    from tests.governance_support import governed_key

    ws = await factory.workspace(roles=("owner", "member"))
    await governed_key(factory, client, ws, "agent", persona=GATED)
    escalated = await client.post("/api/mcp/tools/prism_entity_crud/", headers=ws.headers("agent"), json={
        "app": "finance", "entity": "vendor", "operation": "create", "arguments": {"name": "Acme"}})
    assert escalated.status_code == 202, escalated.text
    await _give_role(db, ws, "member", "key-holder", ["keys.view_key", "keys.add_key"])
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        inbox = await c.get("/console/oversight/", params=org)
        state = await c.get("/console/oversight/state/", params=org)
    assert inbox.status_code == 403, inbox.status_code
    assert state.status_code == 403, (state.status_code, state.text)
    assert not state.text.startswith("1:")
