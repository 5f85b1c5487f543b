"""The credential caches hold what was used lately, not every credential the process ever saw: a server runs for
weeks while keys are minted, OAuth grants made and custom roles edited (docs/operations.md "Memory").

An API key, an OAuth grant and a tenant host are each remembered for `credential_cache_seconds` and then
dropped (at most MAX_CACHED_KEYS / MAX_CACHED_GRANTS / MAX_TENANT_HOSTS at once); a role's shared permission set
(with its memo of up to one entry per permission of the registry) goes with the last cached credential of it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from sqlalchemy import select

import prism.auth.authenticator as authenticator_module
from prism.auth.authenticator import Authenticator
from prism.auth.permissions import PermissionSet
from prism.config import Settings
from prism.errors import TenantNotFound, Unauthenticated
from prism.models import Role, User
from prism.oauth.resource import AccessTokens
from prism.oauth.schemas import ClientRegistration
from prism.oauth.service import TokenContext, create_code, exchange_code, register_client, s256
from prism.storage import Database
from prism.tenancy.hosts import classify_host
from tests.factories import Factory, Workspace
from tests.processes import TEST_SECRET_KEY_FILE

WINDOW = 0.2  # credential_cache_seconds of these tests: every credential used before a sleep is stale after it


async def _keys(factory: Factory, ws: Workspace, count: int, *, roles: list[str] | None = None) -> list[str]:
    return [await factory.add_key(ws, f"k{i}", role=roles[i] if roles else "owner") for i in range(count)]


async def _custom_roles(db: Database, ws: Workspace, count: int) -> list[str]:
    """`count` custom roles of the workspace's tenant, each with patterns of its own."""
    names = [f"custom{i}" for i in range(count)]
    async with db.write() as s:
        s.add_all(Role(tenant_id=ws.tenant.id, name=name, permissions=[f"app{i}.*", "spare_parts.view_*"])
                  for i, name in enumerate(names))
    return names


async def test_keys_not_used_within_the_window_are_dropped(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    keys = await _keys(factory, ws, 12)
    host = classify_host(ws.host, "localhost")
    authenticator = Authenticator(db, cache_seconds=WINDOW)
    for key in keys:
        await authenticator.authenticate(f"Bearer {key}", host)
    await asyncio.sleep(WINDOW * 1.5)
    await authenticator.authenticate(f"Bearer {ws.keys['owner']}", host)
    assert len(authenticator._cache) == 1  # the twelve are stale: a use would read them again anyway
    assert authenticator.peek(f"Bearer {ws.keys['owner']}", host) is not None  # the one just used answers at once


async def test_the_key_cache_holds_at_most_its_bound(db: Database, factory: Factory,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(authenticator_module, "MAX_CACHED_KEYS", 5, raising=False)
    ws = await factory.workspace(roles=("owner",))
    keys = await _keys(factory, ws, 12)
    host = classify_host(ws.host, "localhost")
    authenticator = Authenticator(db, cache_seconds=3600)
    for key in keys:
        await authenticator.authenticate(f"Bearer {key}", host)
    assert len(authenticator._cache) == 5
    assert authenticator.peek(f"Bearer {keys[-1]}", host) is not None  # the newest are the ones kept
    assert authenticator.peek(f"Bearer {keys[0]}", host) is None  # the oldest went first
    await authenticator.authenticate(f"Bearer {keys[0]}", host)  # and is read again when used
    assert authenticator.peek(f"Bearer {keys[0]}", host) is not None


async def test_a_role_permission_set_goes_with_its_last_cached_key(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    roles = await _custom_roles(db, ws, 10)
    keys = await _keys(factory, ws, 10, roles=roles)
    host = classify_host(ws.host, "localhost")
    authenticator = Authenticator(db, cache_seconds=WINDOW)
    contexts = [await authenticator.authenticate(f"Bearer {key}", host) for key in keys]
    shared = await authenticator.authenticate(f"Bearer {keys[0]}", host)
    assert shared.permissions is contexts[0].permissions  # one set per role's patterns while its keys are cached
    del contexts, shared
    await asyncio.sleep(WINDOW * 1.5)
    await authenticator.authenticate(f"Bearer {ws.keys['owner']}", host)
    gc.collect()
    assert not _live_permission_sets(lambda patterns: any(p.startswith("app") for p in patterns))


async def test_a_custom_role_key_of_another_tenant_gets_its_own_tenants_role(db: Database, factory: Factory) -> None:
    """Roles of the same name in two tenants are two roles: the shared permission sets are keyed by patterns, so
    each key still gets its own role's."""
    first, second = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with db.write() as s:
        s.add(Role(tenant_id=first.tenant.id, name="auditor", permissions=["finance.view_*"]))
        s.add(Role(tenant_id=second.tenant.id, name="auditor", permissions=["claims.view_*"]))
    key_one = await factory.add_key(first, "auditor", role="auditor")
    key_two = await factory.add_key(second, "auditor", role="auditor")
    authenticator = Authenticator(db, cache_seconds=WINDOW)
    one = await authenticator.authenticate(f"Bearer {key_one}", classify_host(first.host, "localhost"))
    two = await authenticator.authenticate(f"Bearer {key_two}", classify_host(second.host, "localhost"))
    assert one.permissions.allows("finance.view_invoice") and not one.permissions.allows("claims.view_claim")
    assert two.permissions.allows("claims.view_claim") and not two.permissions.allows("finance.view_invoice")
    with pytest.raises(Unauthenticated, match="another tenant"):
        await authenticator.authenticate(f"Bearer {key_one}", classify_host(second.host, "localhost"))


async def test_tenant_hosts_not_asked_for_within_the_window_are_dropped(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    authenticator = Authenticator(db, cache_seconds=WINDOW)
    for i in range(20):  # any request may name any subdomain
        with pytest.raises(TenantNotFound):
            await authenticator.require_tenant_host(classify_host(f"nobody{i}.localhost", "localhost"))
    await asyncio.sleep(WINDOW * 1.5)
    await authenticator.require_tenant_host(classify_host(ws.host, "localhost"))
    assert len(authenticator._tenants) == 1


async def test_oauth_grants_not_used_within_the_window_are_dropped(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    settings = Settings(secret_key_file=str(TEST_SECRET_KEY_FILE), credential_cache_seconds=WINDOW)
    tokens = AccessTokens(db, settings)
    issued = [await _access_token(db, tokens, settings, ws) for _ in range(8)]
    host = classify_host(ws.host, "localhost")
    for token in issued:
        await tokens.authenticate(token, host)
    await asyncio.sleep(WINDOW * 1.5)
    fresh = await _access_token(db, tokens, settings, ws)
    await tokens.authenticate(fresh, host)
    assert len(tokens._grants) == 1
    assert len(tokens._governance) == 1  # the one client, in the one organization


async def _access_token(db: Database, tokens: AccessTokens, settings: Settings, ws: Workspace) -> str:
    """An access token of a grant of its own, made as the token endpoint makes it (a code exchanged)."""
    issuer = f"http://{ws.host}"
    verifier = "v" * 43
    await tokens.ring.signer()  # loaded (or made) before the transaction below: it writes in one of its own
    async with db.write() as s:
        client = (await register_client(s, ClientRegistration(
            client_id=None, client_name="Cache bounds", redirect_uris=["http://127.0.0.1/callback"],
            grant_types=["authorization_code"], response_types=["code"], token_endpoint_auth_method="none",
            scope=None, extra={}))).client
        user_id = (await s.execute(select(User.id).where(User.email == ws.emails["owner"]))).scalar_one()
        code = await create_code(s, settings, client_id=client.client_id, user_id=user_id,
                                 organization_ids=[ws.org.id], redirect_uri="http://127.0.0.1/callback",
                                 redirect_uri_sent=True, code_challenge=s256(verifier), scope="mcp:read",
                                 issuer=issuer, audience=issuer)
        answer: dict[str, Any] = await exchange_code(
            s, TokenContext(tokens.ring, settings, issuer), client, code=code, verifier=verifier,
            redirect_uri="http://127.0.0.1/callback", resource=None)
    token: str = answer["access_token"]
    return token


def _live_permission_sets(matching: Any) -> list[PermissionSet]:
    return [o for o in gc.get_objects() if isinstance(o, PermissionSet) and matching(o.patterns)]
