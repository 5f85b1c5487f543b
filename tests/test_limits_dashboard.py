"""The key dashboard (/keys/) over HTTP: own keys per organization, mint once, revoke, CSRF, framing, and
isolation between users and tenants. The browser run is in test_limits_dashboard_browser.py."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.app import create_app
from prism.config import Settings
from prism.console.caller import ConsoleCaller
from prism.models import ApiKey, AuditEntry
from prism.storage import Database
from prism.storage.errors import DatabaseUnavailable
from tests.factories import PASSWORD, Factory

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found, page.text
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, email: str, host: str = "localhost") -> str:
    """Log in through the real login page; the CSRF token of the signed-in session."""
    page = await client.get("/login/", headers={"Host": host})
    done = await client.post("/login/", headers={"Host": host},
                             data={"csrf_token": csrf_of(page), "email": email, "password": PASSWORD, "next": "/keys/"})
    assert done.status_code == 303, done.text
    return csrf_of(await client.get("/keys/", headers={"Host": host}))


async def test_signed_out_visitors_are_sent_to_the_login_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/keys/")
    assert response.status_code == 303 and response.headers["location"] == "/login/?next=%2Fkeys%2F"
    assert (await client.post("/keys/", data={})).status_code == 303


async def test_the_dashboard_lists_own_keys_without_secrets_and_cannot_be_framed(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("member", "viewer"))
    await sign_in(client, ws.emails["member"])
    page = await client.get("/keys/")
    assert page.status_code == 200
    assert page.headers["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in page.headers[
        "Content-Security-Policy"] and page.headers["Cache-Control"] == "no-store"
    member_key, viewer_key = ws.keys["member"], ws.keys["viewer"]
    async with db.read() as session:
        stored = (await session.execute(select(ApiKey).where(ApiKey.lookup == member_key[:15]))).scalar_one()
    assert member_key[:15] in page.text and ws.org.name in page.text and "mcp:read mcp:write mcp:execute" in page.text
    assert member_key not in page.text and stored.key_hash not in page.text
    assert viewer_key[:15] not in page.text  # another user's key in the same organization


async def test_minting_shows_the_plaintext_once_and_the_key_works(client: httpx.AsyncClient,
                                                                  factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    csrf = await sign_in(client, ws.emails["member"])
    minted = await client.post("/keys/", data={"csrf_token": csrf, "organization": ws.org.id, "name": "laptop",
                                               "mcp:read": "1", "expires_days": "30", "tool_surface": "split"})
    assert minted.status_code == 201, minted.text
    plaintext = re.search(r'id="new-key-value">(ck_[A-Za-z0-9]{40})<', minted.text)
    assert plaintext, minted.text
    key = plaintext.group(1)
    me = await client.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {key}", "Host": ws.host})
    assert me.status_code == 200 and me.json()["key"]["scopes"] == ["mcp:read"]
    assert me.json()["key"]["name"] == "laptop"
    again = await client.get("/keys/")
    assert key not in again.text and key[:15] in again.text
    row = re.search(rf'data-prefix="{key[:15]}">.*?class="tool-surface">(\w+)<', again.text, re.S)
    assert row and row.group(1) == "split", again.text  # the MCP tool surface the key asked for


async def test_minting_refuses_bad_input_and_missing_csrf(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    csrf = await sign_in(client, ws.emails["member"])
    base = {"csrf_token": csrf, "organization": ws.org.id, "mcp:read": "1"}
    no_scope = await client.post("/keys/", data={"csrf_token": csrf, "organization": ws.org.id})
    assert no_scope.status_code == 400 and "choose at least one scope" in no_scope.text
    for days in ("-3", "²", "9" * 5000):  # "²" passes str.isdigit(), and int() refuses it and 5000 digits
        bad_expiry = await client.post("/keys/", data={**base, "expires_days": days})
        assert bad_expiry.status_code == 400 and "whole number of days" in bad_expiry.text, days
    bad_surface = await client.post("/keys/", data={**base, "tool_surface": "tiny"})
    assert bad_surface.status_code == 400 and "is not a tool surface" in bad_surface.text
    forged = await client.post("/keys/", data={**base, "csrf_token": "forged"})
    assert forged.status_code == 403 and "ck_" not in forged.text


async def test_a_user_of_tenant_a_can_neither_see_nor_mint_in_nor_revoke_in_tenant_b(
        client: httpx.AsyncClient, factory: Factory) -> None:
    a, b = await factory.workspace(roles=("member",)), await factory.workspace(roles=("member",))
    async with factory.db.read() as session:
        b_key = (await session.execute(select(ApiKey).where(ApiKey.lookup == b.keys["member"][:15]))).scalar_one()
    csrf = await sign_in(client, a.emails["member"])
    page = await client.get("/keys/")
    assert a.keys["member"][:15] in page.text and b.keys["member"][:15] not in page.text
    revoke = await client.post(f"/keys/{b_key.id}/revoke/", data={"csrf_token": csrf})
    assert revoke.status_code == 404 and "key_not_found" in revoke.text
    mint = await client.post("/keys/", data={"csrf_token": csrf, "organization": b.org.id, "mcp:read": "1"})
    assert mint.status_code == 404 and "ck_" not in mint.text.replace(a.keys["member"][:15], "")
    still = await client.get("/api/v1/dev/me/", headers=b.headers("member"))
    assert still.status_code == 200
    # Even on tenant B's host, A finds no organization of B to act in.
    on_b = await client.get("/keys/", headers={"Host": b.host})
    assert b.keys["member"][:15] not in on_b.text
    assert 'id="no-organizations"' in on_b.text or on_b.status_code == 303


async def test_revoking_a_key_refuses_it_afterwards(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("member",))
    async with factory.db.read() as session:
        key = (await session.execute(select(ApiKey).where(ApiKey.lookup == ws.keys["member"][:15]))).scalar_one()
    csrf = await sign_in(client, ws.emails["member"])
    forged = await client.post(f"/keys/{key.id}/revoke/", data={})
    assert forged.status_code == 403
    done = await client.post(f"/keys/{key.id}/revoke/", data={"csrf_token": csrf})
    assert done.status_code == 303 and done.headers["location"] == "/keys/"
    page = await client.get("/keys/")
    assert "revoked" in page.text and f'id="revoke-{key.id}"' not in page.text
    refused = await client.get("/api/v1/dev/me/", headers=ws.headers("member"))
    assert refused.status_code == 401


async def test_a_key_revoked_on_the_dashboard_is_refused_at_once_despite_the_credential_cache(
        settings: Settings, factory: Factory) -> None:
    application = create_app(settings.model_copy(update={"credential_cache_seconds": 300}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            ws = await factory.workspace(roles=("member",))
            assert (await client.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 200  # cached
            async with factory.db.read() as session:
                key = (await session.execute(select(ApiKey).where(ApiKey.lookup == ws.keys["member"][:15]))
                       ).scalar_one()
            csrf = await sign_in(client, ws.emails["member"])
            done = await client.post(f"/keys/{key.id}/revoke/", data={"csrf_token": csrf})
            assert done.status_code == 303
            assert (await client.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 401


async def test_a_role_without_view_key_is_not_shown_its_keys_and_the_listing_is_audited(
        app: Any, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/governance.md: listing one's own keys needs `keys.view_key`, as on the console; the dashboard lists them
    through the keys handler (audited), not from the database."""
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.give_role(ws, "member", "minter", ["keys.add_key"])
    await sign_in(client, ws.emails["member"])
    page = await client.get("/keys/")
    assert page.status_code == 200 and ws.keys["member"][:15] not in page.text and "keys.view_key" in page.text
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=client.base_url) as owner:
        await sign_in(owner, ws.emails["owner"])
        page = await owner.get("/keys/")
    assert ws.keys["owner"][:15] in page.text
    async with db.read() as s:
        listed = (await s.execute(select(AuditEntry.coordinate).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.coordinate == "config_manage/keys/key/list"))).all()
    assert listed, "the owner's listing went through the dispatcher"


async def test_a_minted_key_is_shown_once_even_when_the_listing_fails(
        client: httpx.AsyncClient, factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("member",))
    csrf = await sign_in(client, ws.emails["member"])
    real = ConsoleCaller.call

    async def busy_listing(self: ConsoleCaller, request: Any, coordinate: str, arguments: dict[str, Any]) -> Any:
        if coordinate.endswith("/list"):
            raise DatabaseUnavailable()
        return await real(self, request, coordinate, arguments)

    monkeypatch.setattr(ConsoleCaller, "call", busy_listing)
    minted = await client.post("/keys/", data={"csrf_token": csrf, "organization": ws.org.id, "name": "laptop",
                                               "mcp:read": "1"})
    assert minted.status_code == 201, minted.text
    assert re.search(r'id="new-key-value">ck_[A-Za-z0-9]{40}<', minted.text), minted.text
    assert "cannot be listed right now" in minted.text
