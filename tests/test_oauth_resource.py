"""Access tokens on the REST doors: what is accepted and what is refused (the resource-server matrix)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from sqlalchemy import select, update

from prism.config import Settings
from prism.errors import CredentialNoLongerValid
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import utcnow
from prism.oauth.models import OAuthGrant, OAuthSigningKey
from prism.oauth.resource import AccessTokens
from prism.storage import Database
from prism.tenancy.hosts import classify_host
from tests.factories import Factory, Workspace
from tests.oauth_support import bearer, browser, register, tokens_for
from tests.processes import run_cli
from tests.test_authz import PausedReads

ME = "/api/v1/dev/me/"
CANONICAL = "/api/mcp/tools/prism_entity_crud/"


def _segments(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")
    return _json(header), _json(payload)


def _json(part: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return value


async def _signed(app: Any, claims: dict[str, Any], **header: Any) -> str:
    kid, key = await app.state.authenticator.tokens.ring.signer()
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid, "typ": "at+jwt", **header})


async def _token(app: object, ws: Workspace) -> str:
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
    token: str = tokens["access_token"]
    return token


async def test_the_access_token_is_an_rs256_at_jwt_with_the_documented_claims(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    header, claims = _segments(await _token(app, ws))
    assert header["alg"] == "RS256" and header["typ"] == "at+jwt" and header["kid"]
    assert claims["iss"] == f"http://{ws.host}" and claims["aud"] == f"http://{ws.host}"
    assert claims["org"] == ws.org.id and claims["scope"] == "mcp:read mcp:write mcp:execute"
    assert claims["exp"] - claims["iat"] == 3600
    assert {"sub", "client_id", "jti"} <= set(claims)


async def test_the_access_token_verifies_against_the_published_jwks(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    token = await _token(app, ws)
    async with browser(app, ws.host) as c:
        keys = (await c.get("/.well-known/jwks.json")).json()["keys"]
    header, _ = _segments(token)
    jwk = next(k for k in keys if k["kid"] == header["kid"])
    assert {"kty", "kid", "use", "n", "e"} <= set(jwk) and jwk["kty"] == "RSA" and jwk["use"] == "sig"
    claims = jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["RS256"], audience=f"http://{ws.host}")
    assert claims["org"] == ws.org.id


async def test_an_unsigned_alg_none_token_is_refused(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    _, claims = _segments(await _token(app, ws))
    forged = jwt.encode(claims, None, algorithm="none", headers={"typ": "at+jwt"})  # type: ignore[arg-type]
    async with browser(app, ws.host) as c:
        answer = await c.get(ME, headers=bearer(forged))
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_token"


async def test_an_hs256_token_keyed_with_the_public_key_is_refused(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    token = await _token(app, ws)
    header, claims = _segments(token)
    public = await app.state.authenticator.tokens.ring.public_key(header["kid"])  # type: ignore[attr-defined]
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    head = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": header["kid"]}).encode())
    signing_input = head.rstrip(b"=").decode() + "." + body
    signature = base64.urlsafe_b64encode(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())
    forged = signing_input + "." + signature.rstrip(b"=").decode()
    async with browser(app, ws.host) as c:
        answer = await c.get(ME, headers=bearer(forged))
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_token"


async def test_a_tampered_token_is_refused(app: object, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    token = await _token(app, ws)
    header, _, signature = token.split(".")
    _, claims = _segments(token)
    claims["org"] = other.org.id
    changed = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    async with browser(app, ws.host) as c:
        answer = await c.get(ME, headers=bearer(f"{header}.{changed}.{signature}"))
    assert answer.status_code == 401


@pytest.mark.parametrize(("change", "message"), [
    ({"exp": int(time.time()) - 120, "iat": int(time.time()) - 4000}, "expired"),
    ({"aud": "https://api.elsewhere.example"}, "audience"),
    ({"iss": "http://elsewhere.localhost"}, "another host"),
])
async def test_expired_foreign_audience_and_foreign_issuer_tokens_are_refused(
        app: object, factory: Factory, change: dict[str, Any], message: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    _, claims = _segments(await _token(app, ws))
    forged = await _signed(app, {**claims, **change})
    async with browser(app, ws.host) as c:
        answer = await c.get(ME, headers=bearer(forged))
    assert answer.status_code == 401, answer.text
    assert message in answer.json()["message"]
    assert answer.headers["www-authenticate"] == (  # RFC 6750 3.1, as on the MCP door
        f'Bearer realm="prism", resource_metadata="http://{ws.host}/.well-known/oauth-protected-resource", '
        'error="invalid_token"')


async def test_a_token_of_one_tenant_on_another_tenants_host_is_401(app: object, factory: Factory) -> None:
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    token = await _token(app, a)
    async with browser(app, b.host) as c:
        me = await c.get(ME, headers=bearer(token))
        call = await c.post(CANONICAL, headers=bearer(token), json={
            "operation": "list", "app": "spare_parts", "entity": "spare_part", "arguments": {}})
    assert me.status_code == 401 and me.json()["error"] == "invalid_token"
    assert call.status_code == 401
    for answer in (me, call):
        assert answer.headers["www-authenticate"].endswith(', error="invalid_token"'), answer.headers


async def test_a_token_without_an_organization_is_403_session_incomplete(app: object, factory: Factory) -> None:
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    # a's user has no organization in tenant b: the consent page offers none, the grant carries none.
    async with browser(app, b.host) as c:
        tokens = await tokens_for(c, a)
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
        info = await c.get("/api/mcp/oauth/userinfo/", headers=bearer(tokens["access_token"]))
    assert me.status_code == 403 and me.json()["error"] == "session_incomplete"
    assert info.status_code == 200 and info.json()["org"] is None


async def test_a_token_works_on_the_canonical_door_within_its_scopes(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        read_only = await tokens_for(c, ws, scope="mcp:read")
        listed = await c.post(CANONICAL, headers=bearer(read_only["access_token"]), json={
            "operation": "list", "app": "spare_parts", "entity": "spare_part", "arguments": {}})
        created = await c.post(CANONICAL, headers=bearer(read_only["access_token"]), json={
            "operation": "create", "app": "spare_parts", "entity": "spare_part",
            "arguments": {"sku": "SKU-1", "name": "Bolt"}})
    assert listed.status_code == 200 and listed.json()["success"] is True
    assert created.status_code == 403 and created.json()["error"] == "permission_denied"


async def test_a_platform_host_grant_names_the_organization_across_tenants(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, "localhost") as c:
        tokens = await tokens_for(c, ws)
        me = await c.get(ME, headers=bearer(tokens["access_token"]))
    assert me.status_code == 200, me.text
    assert me.json()["tenant"]["subdomain"] == ws.tenant.subdomain


async def test_a_401_names_the_protected_resource_metadata_on_every_door(client: httpx.AsyncClient) -> None:
    headers = {"Authorization": "Bearer not.a.token", "Host": "localhost:8000"}
    answers = [await client.get(ME, headers=headers),
               await client.post(CANONICAL, headers=headers, json={}),  # the fast path, outside the router
               await client.post("/prism/entity_crud/spare_parts/spare_part/list", headers=headers, json={})]
    for answer in answers:
        assert answer.status_code == 401
        assert 'resource_metadata="http://localhost:8000/.well-known/oauth-protected-resource"' in \
            answer.headers["www-authenticate"], answer.request.url


async def test_signing_keys_are_encrypted_at_rest(app: object, db: Database) -> None:
    await app.state.authenticator.tokens.ring.signer()  # type: ignore[attr-defined]
    async with db.read() as session:
        rows = list((await session.execute(select(OAuthSigningKey))).scalars())
    assert rows
    for row in rows:
        assert "PRIVATE KEY" not in row.private_key_encrypted
        assert b"PRIVATE KEY" not in base64.b64decode(row.private_key_encrypted)


async def test_rotating_keys_keeps_old_tokens_valid_and_signs_new_ones_with_the_new_key(
        app: Any, factory: Factory, settings: Settings, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    old = await _token(app, ws)
    rotated = run_cli("keys", "rotate", "--json", database_url=database_url,
                      PRISM_SECRET_KEY_FILE=settings.secret_key_file, PRISM_SECRET_KEY=settings.secret_key or "")
    assert rotated.returncode == 0, str(rotated)
    app.state.authenticator.tokens.ring.forget()  # what the one-minute reload does in a running server
    new = await _token(app, ws)
    assert _segments(new)[0]["kid"] == rotated.json["kid"] != _segments(old)[0]["kid"]
    async with browser(app, ws.host) as c:
        kids = {k["kid"] for k in (await c.get("/.well-known/jwks.json")).json()["keys"]}
        old_answer = await c.get(ME, headers=bearer(old))
        new_answer = await c.get(ME, headers=bearer(new))
    assert {_segments(old)[0]["kid"], rotated.json["kid"]} <= kids
    assert old_answer.status_code == 200 and new_answer.status_code == 200


async def test_registration_and_tokens_are_per_client(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        first = await register(c, {"client_name": "one", "redirect_uris": ["https://one.example/cb"]})
        tokens = await tokens_for(c, ws, client=first)
    assert _segments(tokens["access_token"])[1]["client_id"] == first["client_id"]


async def test_x_organization_context_moves_a_token_between_its_consented_organizations_and_no_further(
        app: object, db: Database, factory: Factory) -> None:
    from prism.identity.service import add_to_organization
    from prism.models import User

    ws = await factory.workspace(roles=("owner",))
    second = await factory.second_org(ws, "Second org")
    foreign = await factory.second_org(ws, "Not theirs")
    async with db.write() as s:
        user = (await s.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await add_to_organization(s, user, second, role="viewer")
    whoami = "/api/mcp/tools/prism_whoami/"
    async with browser(app, ws.host) as c:
        token = (await tokens_for(c, ws, organizations=[ws.org.id, second.id]))["access_token"]
        granted = await c.post(whoami, headers=bearer(token), json={})
        moved = await c.post(whoami, headers={**bearer(token), "X-Organization-Context": second.id}, json={})
        as_public_id = await c.post(whoami, json={}, headers={
            **bearer(token), "X-Organization-Context": "org_" + second.id.replace("-", "")})
        # The viewer role of the second organization applies there: no writes.
        write = await c.post(CANONICAL, headers={**bearer(token), "X-Organization-Context": second.id}, json={
            "operation": "create", "app": "spare_parts", "entity": "spare_part",
            "arguments": {"sku": "SKU-ORG", "name": "Bolt"}})
        not_member = await c.post(whoami, headers={**bearer(token), "X-Organization-Context": foreign.id}, json={})
        garbage = await c.post(whoami, headers={**bearer(token), "X-Organization-Context": "accounting"}, json={})
        # An API key is bound to its organization: the header changes nothing.
        key = await c.post(whoami, headers={**ws.headers(), "X-Organization-Context": second.id}, json={})
    assert granted.json()["data"]["organization"]["id"] == public_organization_id(ws.org.id)
    assert moved.json()["data"]["organization"] == {
        "id": public_organization_id(second.id), "name": "Second org", "role": "viewer"}
    assert as_public_id.json()["data"]["organization"]["id"] == public_organization_id(second.id)
    assert write.status_code == 403 and write.json()["error"] == "permission_denied"
    assert not_member.status_code == 403 and not_member.json()["error"] == "organization_not_consented"
    assert garbage.status_code == 400 and garbage.json()["error"] == "invalid_organization_context"
    assert key.json()["data"]["organization"]["id"] == public_organization_id(ws.org.id)


async def test_a_grant_forgotten_while_it_was_being_read_is_not_cached_as_it_was(
        app: Any, db: Database, factory: Factory) -> None:
    """A request that read the grant just before its revocation committed, and finished after the revoking process
    forgot it, must not put the live grant back in the cache: its tokens would work there for another
    `credential_cache_seconds` where docs/oauth.md says they stop at once."""
    ws = await factory.workspace(roles=("owner",))
    token = await _token(app, ws)
    paused = PausedReads(db.url)
    try:
        tokens = AccessTokens(paused, Settings(database_url=db.url, credential_cache_seconds=60))
        host = classify_host(ws.host, app.state.settings.base_domain)
        claims, _ = await tokens.claims(token, host)  # the signing keys known: the next read is the grant's
        tokens.forget(claims.grant_id)
        paused.armed = True
        before = asyncio.create_task(tokens.claims(token, host))
        await paused.read_done.wait()  # read as it was: live
        async with db.write() as session:
            await session.execute(update(OAuthGrant).where(OAuthGrant.id == claims.grant_id)
                                  .values(revoked_at=utcnow()))
        tokens.forget(claims.grant_id)  # the revocation committed, as the revocation endpoint does
        paused.go_on.set()
        await before  # it began before the revocation: it may pass
        with pytest.raises(CredentialNoLongerValid):
            await tokens.claims(token, host)
    finally:
        await paused.dispose()
