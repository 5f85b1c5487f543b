"""A grant (and a code not yet exchanged) made before grants recorded their organizations keeps working after
migration 0010, in its one organization and no other."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from alembic import command

from prism.app import create_app
from prism.config import Settings
from prism.identity.passwords import hash_password
from prism.identity.service import add_to_organization
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import utcnow
from prism.migrate import alembic_config, migrate_with_alembic
from prism.models.base import UTCDateTime
from prism.oauth.service import s256
from prism.oauth.tokens import hash_secret, issue_access_token
from prism.ratelimit import TIERS
from prism.storage import Database
from prism.tenancy.service import create_tenant
from tests.factories import PASSWORD, unique
from tests.oauth_support import CLAUDE_REDIRECT, CLIENT_BODIES, OAUTH, bearer, browser, pkce
from tests.processes import TEST_SECRET_KEY_FILE, scratch_database

BEFORE = "0009_mcp_legacy_streams"
WHOAMI = "/api/mcp/tools/prism_whoami/"
SCOPE = "mcp:read mcp:write mcp:execute"

# The two tables as they were before the migration, with only the columns written here.
GRANTS = sa.table("oauth_grants", sa.column("id", sa.String), sa.column("client_id", sa.String),
                  sa.column("user_id", sa.String), sa.column("organization_id", sa.String),
                  sa.column("scope", sa.Text), sa.column("issuer", sa.String), sa.column("audience", sa.String),
                  sa.column("created_at", UTCDateTime()))
CODES = sa.table("oauth_codes", sa.column("id", sa.String), sa.column("code_hash", sa.String),
                 sa.column("client_id", sa.String), sa.column("user_id", sa.String),
                 sa.column("organization_id", sa.String), sa.column("redirect_uri", sa.Text),
                 sa.column("redirect_uri_sent", sa.Boolean), sa.column("code_challenge", sa.String),
                 sa.column("scope", sa.Text), sa.column("issuer", sa.String), sa.column("audience", sa.String),
                 sa.column("expires_at", UTCDateTime()), sa.column("created_at", UTCDateTime()))


# Organizations and their audit heads as revision 0009 stored them (today's models have more columns).
ORGANIZATIONS = sa.table("organizations", sa.column("id", sa.String), sa.column("tenant_id", sa.String),
                         sa.column("slug", sa.String), sa.column("name", sa.String),
                         sa.column("created_at", UTCDateTime()))
HEADS = sa.table("audit_heads", sa.column("organization_id", sa.String), sa.column("seq", sa.BigInteger),
                 sa.column("hash", sa.String))


USERS = sa.table("users", sa.column("id", sa.String), sa.column("email", sa.String),
                 sa.column("password_hash", sa.String), sa.column("is_active", sa.Boolean),
                 sa.column("created_at", UTCDateTime()))


async def old_user(session: Any, email: str) -> Any:
    """A user as revision 0009 stored one (today's model has more columns)."""
    user_id = str(uuid.uuid4())
    await session.execute(USERS.insert().values(id=user_id, email=email, password_hash=hash_password(PASSWORD),
                                                is_active=True, created_at=utcnow()))
    return SimpleNamespace(id=user_id)


async def old_organization(session: Any, tenant_id: str, slug: str) -> Any:
    org_id = str(uuid.uuid4())
    await session.execute(ORGANIZATIONS.insert().values(id=org_id, tenant_id=tenant_id, slug=slug, name=slug,
                                                        created_at=utcnow()))
    await session.execute(HEADS.insert().values(organization_id=org_id, seq=0, hash="0" * 64))
    return SimpleNamespace(id=org_id, tenant_id=tenant_id)


async def test_a_single_organization_grant_made_before_the_upgrade_acts_in_its_organization_only(
        tmp_path: Path) -> None:
    with scratch_database(tmp_path, "grants") as url:
        await asyncio.to_thread(command.upgrade, alembic_config(url), BEFORE)
        subdomain, client_id, verifier = unique("mig"), f"migrated-{secrets.token_hex(6)}", pkce()[0]
        issuer = f"http://{subdomain}.localhost"
        db = Database(url)
        try:
            async with db.write() as s:
                tenant = await create_tenant(s, subdomain, name="Migrated")
                main = await old_organization(s, tenant.id, "main-org")
                other = await old_organization(s, tenant.id, "other-org")
                user = await old_user(s, f"{unique('owner')}@example.com")
                await add_to_organization(s, user, main, role="owner")
                await add_to_organization(s, user, other, role="owner")  # a member, never consented for it
                grant_id, code = secrets.token_hex(8), "pac_" + secrets.token_urlsafe(32)
                now = utcnow()
                await s.execute(GRANTS.insert().values(
                    id=grant_id, client_id=client_id, user_id=user.id, organization_id=main.id, scope=SCOPE,
                    issuer=issuer, audience=issuer, created_at=now))
                await s.execute(CODES.insert().values(
                    id=secrets.token_hex(8), code_hash=hash_secret(code), client_id=client_id, user_id=user.id,
                    organization_id=main.id, redirect_uri=CLAUDE_REDIRECT, redirect_uri_sent=True,
                    code_challenge=s256(verifier), scope=SCOPE, issuer=issuer, audience=issuer,
                    expires_at=now + timedelta(minutes=10), created_at=now))
                user_id, main_id, other_id = user.id, main.id, other.id
        finally:
            await db.dispose()

        await asyncio.to_thread(migrate_with_alembic, url)

        settings = Settings(database_url=url, credential_cache_seconds=0, seed_demo=False,
                            secret_key_file=str(TEST_SECRET_KEY_FILE), webhook_worker_in_process=False,
                            **{f"rate_limit_{tier}": 10**9 for tier in TIERS})
        app = create_app(settings)
        async with app.router.lifespan_context(app), browser(app, f"{subdomain}.localhost") as c:
            registered = await c.post(f"{OAUTH}/register/", json={**CLIENT_BODIES["claude"], "client_id": client_id})
            assert registered.status_code == 201, registered.text
            old_token = await issue_access_token(
                app.state.authenticator.tokens.ring, issuer=issuer, subject=user_id, audience=issuer,
                client_id=client_id, scope=SCOPE, organization_id=main_id, grant_id=grant_id, lifetime=600)
            exchanged = await c.post(f"{OAUTH}/token/", data={
                "grant_type": "authorization_code", "code": code, "code_verifier": verifier, "client_id": client_id,
                "redirect_uri": CLAUDE_REDIRECT})
            assert exchanged.status_code == 200, exchanged.text
            for token in (old_token, exchanged.json()["access_token"]):
                default = await c.post(WHOAMI, headers=bearer(token), json={})
                named = await c.post(WHOAMI, headers={**bearer(token), "X-Organization-Context": main_id}, json={})
                elsewhere = await c.post(WHOAMI, headers={**bearer(token), "X-Organization-Context": other_id},
                                         json={})
                assert default.status_code == 200, default.text
                assert default.json()["data"]["organization"]["id"] == public_organization_id(main_id)
                assert named.json()["data"]["organization"]["id"] == public_organization_id(main_id)
                assert elsewhere.status_code == 403 and elsewhere.json()["error"] == "organization_not_consented"
