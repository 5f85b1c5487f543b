"""Every way of minting or revoking an API key is governed: the console (/console/keys/), the key dashboard
(/keys/) and key registration (POST /api/mcp/api-keys/register/) all go through the keys handlers, so
`keys.add_key` / `keys.change_key` are checked the same everywhere and each leaves a ledger entry with the
handler's path (the arguments' digest, never the plaintext)."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from prism.models import ApiKey, AuditEntry, Membership, Role, User
from prism.storage import Database
from tests.factories import PASSWORD, Factory, Workspace
from tests.oauth_support import browser, field, sign_in

REGISTER = "/api/mcp/api-keys/register/"
CREATE, REVOKE = "config_manage/keys/key/create", "config_manage/keys/key/revoke"


async def _user_id(db: Database, email: str) -> str:
    async with db.read() as session:
        return (await session.execute(select(User.id).where(User.email == email))).scalar_one()


async def _key_id(db: Database, plaintext: str) -> str:
    async with db.read() as session:
        return (await session.execute(select(ApiKey.id).where(ApiKey.lookup == plaintext[:15]))).scalar_one()


async def _entries(db: Database, organization_id: str, user_id: str) -> list[AuditEntry]:
    async with db.read() as session:
        return list((await session.execute(select(AuditEntry).where(
            AuditEntry.organization_id == organization_id, AuditEntry.actor_user_id == user_id,
            AuditEntry.coordinate.in_((CREATE, REVOKE))).order_by(AuditEntry.id))).scalars())


async def _key_count(db: Database, user_id: str) -> int:
    async with db.read() as session:
        return len((await session.execute(select(ApiKey.id).where(ApiKey.user_id == user_id))).all())


async def _give_role(db: Database, ws: Workspace, label: str, role_name: str, permissions: list[str]) -> None:
    """A tenant's own role for the person `label` in the workspace's organization."""
    async with db.write() as session:
        role = Role(tenant_id=ws.tenant.id, name=role_name, permissions=permissions)
        session.add(role)
        await session.flush()
        user_id = (await session.execute(select(User.id).where(User.email == ws.emails[label]))).scalar_one()
        membership = (await session.execute(select(Membership).where(
            Membership.user_id == user_id, Membership.organization_id == ws.org.id))).scalar_one()
        membership.role_id = role.id


async def _dashboard_mint(c: httpx.AsyncClient, ws: Workspace, name: str) -> httpx.Response:
    page = await c.get("/keys/")
    assert page.status_code == 200, page.text
    return await c.post("/keys/", data={"csrf_token": field(page.text, "csrf_token"), "organization": ws.org.id,
                                        "name": name, "mcp:read": "1"})


async def _dashboard_revoke(c: httpx.AsyncClient, key_id: str) -> httpx.Response:
    page = await c.get("/keys/")
    return await c.post(f"/keys/{key_id}/revoke/", data={"csrf_token": field(page.text, "csrf_token")})


async def _console_mint(c: httpx.AsyncClient, ws: Workspace, name: str) -> httpx.Response:
    page = await c.get("/console/keys/", params={"org": ws.org.id})
    assert page.status_code == 200, page.text
    return await c.post("/console/keys/", params={"org": ws.org.id},
                        data={"csrf_token": field(page.text, "csrf_token"), "name": name, "mcp:read": "on"})


async def _signed_in(c: httpx.AsyncClient, email: str) -> None:
    assert (await sign_in(c, email, next_path="/keys/")).status_code == 303


async def test_a_mint_and_a_revoke_on_the_dashboard_each_leave_a_ledger_entry(app: Any, factory: Factory,
                                                                              db: Database) -> None:
    ws = await factory.workspace(roles=("member",))
    user_id = await _user_id(db, ws.emails["member"])
    async with browser(app, ws.host) as c:
        await _signed_in(c, ws.emails["member"])
        minted = await _dashboard_mint(c, ws, "laptop")
        assert minted.status_code == 201, minted.text
        plaintext = minted.text.split('id="new-key-value">')[1].split("<")[0]
        assert plaintext.startswith("ck_")
        revoked = await _dashboard_revoke(c, await _key_id(db, ws.keys["member"]))
        assert revoked.status_code == 303 and revoked.headers["location"] == "/keys/"
    entries = await _entries(db, ws.org.id, user_id)
    assert [(e.coordinate, e.outcome, e.door) for e in entries] == [(CREATE, "allowed", "console"),
                                                                    (REVOKE, "allowed", "console")]
    assert all(e.credential_id and e.credential_id.startswith("console:") for e in entries)
    assert all(plaintext not in str([e.arguments_digest, e.detail]) for e in entries)
    refused = await httpx.AsyncClient(transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
                                      base_url="http://localhost").get("/api/v1/dev/me/", headers=ws.headers("member"))
    assert refused.status_code == 401  # the revoke was committed


async def test_a_registration_leaves_a_ledger_entry_without_the_key(client: httpx.AsyncClient, factory: Factory,
                                                                    db: Database) -> None:
    ws = await factory.workspace(roles=("member",))
    response = await client.post(REGISTER, json={"email": ws.emails["member"], "password": PASSWORD},
                                 headers={"Host": ws.host})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["api_key"].startswith("mcp_") and body["scopes"] == ["mcp:read", "mcp:write", "mcp:execute"]
    [entry] = await _entries(db, ws.org.id, await _user_id(db, ws.emails["member"]))
    assert (entry.coordinate, entry.outcome, entry.door) == (CREATE, "allowed", "registration")
    assert entry.credential_id is not None and entry.credential_id.startswith("password:")
    assert body["api_key"] not in str([entry.arguments_digest, entry.detail])


async def test_a_role_without_the_keys_permissions_is_refused_on_every_path(app: Any, client: httpx.AsyncClient,
                                                                           factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    await _give_role(db, ws, "member", "auditor", ["*.view_*"])  # deliberately without keys.add_key/change_key
    user_id = await _user_id(db, ws.emails["member"])
    own_key = await _key_id(db, ws.keys["member"])
    async with browser(app, ws.host) as c:
        await _signed_in(c, ws.emails["member"])
        on_dashboard = await _dashboard_mint(c, ws, "not allowed")
        assert on_dashboard.status_code == 403 and "permission_denied" in on_dashboard.text
        assert "keys.add_key" in on_dashboard.text and "ck_" not in on_dashboard.text.replace(
            ws.keys["member"][:15], "")
        revoke = await _dashboard_revoke(c, own_key)
        assert revoke.status_code == 403 and "keys.change_key" in revoke.text
        on_console = await _console_mint(c, ws, "not allowed either")
        assert on_console.status_code == 403 and "keys.add_key" in on_console.text
    registered = await client.post(REGISTER, json={"email": ws.emails["member"], "password": PASSWORD},
                                   headers={"Host": ws.host})
    assert registered.status_code == 403, registered.text
    assert registered.json()["error"] == "permission_denied" and "api_key" not in registered.json()
    assert "keys.add_key" in registered.json()["message"]
    assert await _key_count(db, user_id) == 1  # only the key the member had
    assert (await client.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 200  # not revoked
    refusals = [(e.coordinate, e.outcome, e.door) for e in await _entries(db, ws.org.id, user_id)]
    assert refusals == [(CREATE, "refused", "console"), (REVOKE, "refused", "console"),
                        (CREATE, "refused", "console"), (CREATE, "refused", "registration")]


async def test_a_viewer_mints_on_every_path(app: Any, client: httpx.AsyncClient, factory: Factory,
                                            db: Database) -> None:
    ws = await factory.workspace(roles=("viewer",))
    async with browser(app, ws.host) as c:
        await _signed_in(c, ws.emails["viewer"])
        on_dashboard = await _dashboard_mint(c, ws, "viewer laptop")
        assert on_dashboard.status_code == 201 and 'id="new-key-value">ck_' in on_dashboard.text
        on_console = await _console_mint(c, ws, "viewer desktop")
        assert on_console.status_code == 201 and 'id="new-key-value">ck_' in on_console.text
    registered = await client.post(REGISTER, json={"email": ws.emails["viewer"], "password": PASSWORD},
                                   headers={"Host": ws.host})
    assert registered.status_code == 201 and registered.json()["api_key"].startswith("mcp_"), registered.text
    # The key acts as the viewer it belongs to: the role, not the key, decides what it may do.
    viewer_key = {"Authorization": f"Bearer {registered.json()['api_key']}", "Host": ws.host}
    me = await client.get("/api/v1/dev/me/", headers=viewer_key)
    assert me.status_code == 200 and me.json()["organization"]["role"] == "viewer", me.text


async def test_the_dashboard_does_not_find_another_organizations_or_tenants_key_to_revoke(
        app: Any, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("member",))
    sibling = await factory.second_org(ws, "Sibling org")  # same tenant, not the member's organization
    sibling_key = await factory.add_key(ws, "sibling", org=sibling)
    other = await factory.workspace(roles=("member",))
    user_id = await _user_id(db, ws.emails["member"])
    foreign = [await _key_id(db, sibling_key), await _key_id(db, other.keys["member"])]
    for host in (ws.host, "localhost", other.host):
        async with browser(app, host) as c:
            await _signed_in(c, ws.emails["member"])
            for key_id in foreign:
                refused = await _dashboard_revoke(c, key_id)
                assert refused.status_code == 404 and "key_not_found" in refused.text, (host, key_id)
    async with db.read() as session:
        still = (await session.execute(select(ApiKey.revoked_at).where(ApiKey.id.in_(foreign)))).scalars().all()
    assert still == [None, None]
    for organization_id in (ws.org.id, sibling.id, other.org.id):
        assert await _entries(db, organization_id, user_id) == []
