"""Removing a member ends their API keys and OAuth consent for that organization, for good: adding them back later
(in any role) does not bring any of it back. Their credentials in other organizations and tenants keep working."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import delete, select

from prism.identity.service import add_to_organization, remove_from_organization, set_active
from prism.keys.service import create_key, key_status, tenant_keys
from prism.kit.timeutil import utcnow
from prism.models import Membership, Organization, Tenant, User
from prism.oauth.models import OAuthGrant
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.oauth_support import OAUTH, bearer, browser, tokens_for

ME = "/api/v1/dev/me/"


async def _user(s: Any, ws: Workspace, label: str) -> User:
    user: User = (await s.execute(select(User).where(User.email == ws.emails[label]))).scalar_one()
    return user


async def _remove(db: Database, ws: Workspace, label: str, org: Organization) -> None:
    async with db.write() as s:
        await remove_from_organization(s, await _user(s, ws, label), org)


async def _add(db: Database, ws: Workspace, label: str, org: Organization, role: str) -> None:
    async with db.write() as s:
        await add_to_organization(s, await _user(s, ws, label), org, role=role)


async def _listed_statuses(db: Database, ws: Workspace, label: str) -> list[str]:
    async with db.read() as s:
        tenant = await s.get(Tenant, ws.tenant.id)
        assert tenant is not None
        return [found.status(utcnow()) for found in await tenant_keys(s, tenant=tenant, user=await _user(s, ws, label))]


async def test_removed_member_added_back_does_not_get_their_old_keys_back(
        client: httpx.AsyncClient, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner", "member")), await factory.workspace(roles=("owner",))
    # The same person is also a member of another tenant's organization, with a key there.
    async with db.write() as s:
        user = await _user(s, ws, "member")
        await add_to_organization(s, user, other.org, role="member")
        elsewhere = await create_key(s, tenant=other.tenant, user=user, organization=other.org)
    other.keys["member"], other.emails["member"] = elsewhere.plaintext, ws.emails["member"]
    assert (await client.get(ME, headers=ws.headers("member"))).status_code == 200

    await _remove(db, ws, "member", ws.org)
    refused = await client.get(ME, headers=ws.headers("member"))
    assert refused.status_code == 401, refused.text
    assert await _listed_statuses(db, ws, "member") == ["revoked"]  # not listed as active any more

    await _add(db, ws, "member", ws.org, "viewer")  # added back later, in a lesser role
    again = await client.get(ME, headers=ws.headers("member"))
    assert again.status_code == 401, again.text
    assert "revoked" in again.text
    assert await _listed_statuses(db, ws, "member") == ["revoked"]

    # The other tenant's key was never touched.
    kept = await client.get(ME, headers=other.headers("member"))
    assert kept.status_code == 200, kept.text
    assert await _listed_statuses(db, other, "member") == ["active"]


async def test_a_live_key_of_a_non_member_is_listed_suspended_not_active(
        client: httpx.AsyncClient, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner", "member")), await factory.workspace(roles=("owner",))
    async with db.write() as s:  # a membership that ended with its keys left unrevoked
        user = await _user(s, ws, "member")
        await s.execute(delete(Membership).where(Membership.user_id == user.id,
                                                 Membership.organization_id == ws.org.id))
    assert (await client.get(ME, headers=ws.headers("member"))).status_code == 401
    assert await _listed_statuses(db, ws, "member") == ["suspended"]  # live, but authenticating nobody
    assert await _listed_statuses(db, ws, "owner") == ["active"]
    assert await _listed_statuses(db, other, "owner") == ["active"]


async def test_a_key_of_an_inactive_user_is_listed_suspended_and_active_again_on_activation(
        client: httpx.AsyncClient, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner", "member")), await factory.workspace(roles=("owner",))
    async with db.write() as s:
        await set_active(s, await _user(s, ws, "member"), False)
    assert (await client.get(ME, headers=ws.headers("member"))).status_code == 401
    assert await _listed_statuses(db, ws, "member") == ["suspended"]
    assert await _listed_statuses(db, ws, "owner") == ["active"]
    assert await _listed_statuses(db, other, "owner") == ["active"]
    async with db.read() as s:  # the key's own state is unchanged: nothing was revoked
        tenant = await s.get(Tenant, ws.tenant.id)
        assert tenant is not None
        (found,) = await tenant_keys(s, tenant=tenant, user=await _user(s, ws, "member"))
        assert key_status(found.key, utcnow()) == "active"
    async with db.write() as s:
        await set_active(s, await _user(s, ws, "member"), True)
    assert (await client.get(ME, headers=ws.headers("member"))).status_code == 200
    assert await _listed_statuses(db, ws, "member") == ["active"]


async def test_removed_member_added_back_does_not_get_their_old_oauth_grant_back(
        app: Any, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner", "member")), await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws, label="member")
        headers = {**bearer(tokens["access_token"]), "Host": ws.host}
        assert (await c.get(ME, headers=headers)).status_code == 200
        await _remove(db, ws, "member", ws.org)
        assert (await c.get(ME, headers=headers)).status_code in (401, 403)
        await _add(db, ws, "member", ws.org, "viewer")
        back = await c.get(ME, headers=headers)
        assert back.status_code == 401, back.text  # the grant, consented for this organization alone, is revoked
        client = tokens["client"]
        refreshed = await c.post(f"{OAUTH}/token/", data={
            "grant_type": "refresh_token", "client_id": client["client_id"],
            "refresh_token": tokens["refresh_token"]})
        assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant", refreshed.text
    # Another tenant's user, and their grant, are untouched.
    async with browser(app, other.host) as c:
        theirs = await tokens_for(c, other)
        assert (await c.get(ME, headers={**bearer(theirs["access_token"]), "Host": other.host})).status_code == 200


async def test_removal_withdraws_one_organization_from_a_grant_that_acts_in_others_too(
        app: Any, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner", "member")), await factory.workspace(roles=("owner",))
    await _add(db, ws, "member", other.org, "member")  # a member in both tenants
    host = "localhost"  # the platform host: one grant for organizations of both tenants
    async with browser(app, host) as c:
        tokens = await tokens_for(c, ws, label="member", organizations=[ws.org.id, other.org.id])
        token = tokens["access_token"]

        async def me(organization: str | None) -> httpx.Response:
            context = {"X-Organization-Context": organization} if organization else {}
            return await c.get(ME, headers={**bearer(token), "Host": host, **context})

        assert (await me(None)).json()["organization"]["id"].endswith(ws.org.id.replace("-", ""))
        await _remove(db, ws, "member", ws.org)
        await _add(db, ws, "member", ws.org, "owner")  # back, as owner even
        named = await me(ws.org.id)
        assert named.status_code == 403 and named.json()["error"] == "organization_not_consented", named.text
        default = await me(None)  # the grant's default was the organization left: it has none now
        assert default.status_code == 403 and default.json()["error"] == "session_incomplete", default.text
        kept = await me(other.org.id)  # the other tenant's organization still works
        assert kept.status_code == 200, kept.text
    async with db.read() as s:
        grant = (await s.execute(select(OAuthGrant).where(OAuthGrant.user_id == (await _user(s, ws, "member")).id))
                 ).scalar_one()
        assert grant.revoked_at is None and grant.organization_id is None
