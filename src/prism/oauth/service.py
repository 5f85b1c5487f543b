"""Decisions of the authorization server: registering clients, issuing codes and tokens, revoking grants."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.config import Settings
from prism.errors import Unauthenticated
from prism.kit.secret import same_secret
from prism.kit.timeutil import utcnow
from prism.oauth import repository as repo
from prism.oauth.errors import (
    ClientCredentialMissing,
    CodeRefused,
    GrantReplayed,
    InvalidClient,
    InvalidGrant,
    OAuthError,
)
from prism.oauth.issuer import require_granted_resource
from prism.oauth.keys import KeyRing
from prism.oauth.models import OAuthClient, OAuthCode, OAuthGrant, OAuthGrantOrganization, OAuthRefreshToken
from prism.oauth.schemas import (
    OFFLINE_ACCESS,
    SECRET_METHODS,
    ClientRegistration,
    invalid_metadata,
    require_registered_scope,
)
from prism.oauth.tokens import hash_secret, issue_access_token, new_secret, verify_access_token

VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}\Z")
CLIENT_SECRET_PREFIX = "pcs_"  # noqa: S105 (a prefix, not a secret)
REFRESH_PREFIX = "prt_"
CODE_PREFIX = "pac_"
REGISTRATION_TOKEN_PREFIX = "prat_"  # noqa: S105 (a prefix, not a secret)
REGISTRATION_PATH = "/api/mcp/oauth/register/"


def registration_body(client: OAuthClient, secret: str | None = None, *, issuer: str | None = None,
                      registration_token: str | None = None) -> dict[str, Any]:
    """The client information response (RFC 7591 3.2.1, RFC 7592 3): `registration_client_uri` when `issuer` is
    given and the client can be managed, `registration_access_token` when given (at creation, or echoed to the
    request that presented it)."""
    body: dict[str, Any] = {
        "client_id": client.client_id, "client_name": client.client_name, "redirect_uris": client.redirect_uris,
        "grant_types": client.grant_types, "response_types": client.response_types,
        "token_endpoint_auth_method": client.token_endpoint_auth_method,
        "client_id_issued_at": int(client.created_at.timestamp()), **client.extra,
    }
    if client.scope:
        body["scope"] = client.scope
    if secret is not None:
        body["client_secret"] = secret
        body["client_secret_expires_at"] = 0
    if issuer is not None and client.registration_token_hash is not None:
        body["registration_client_uri"] = registration_uri(issuer, client.client_id)
    if registration_token is not None:
        body["registration_access_token"] = registration_token
    return body


def registration_uri(issuer: str, client_id: str) -> str:
    return f"{issuer}{REGISTRATION_PATH}{quote(client_id, safe='')}"


def _same_registration(client: OAuthClient, reg: ClientRegistration) -> bool:
    return client.fingerprint == reg.fingerprint


@dataclass(frozen=True)
class Registered:
    client: OAuthClient
    secret: str | None  # plaintext, at creation of a confidential client only
    registration_token: str | None  # plaintext, at creation only
    created: bool


async def register_client(session: AsyncSession, reg: ClientRegistration) -> Registered:
    """The same registration sent again finds the same client, and shows neither its secret nor its
    registration access token: only the registration that created a client may manage it.

    A confidential client without a requested client_id is the exception: each registration is a client of its
    own. Every installation of such a client sends the same metadata, and each needs a secret to authenticate;
    the secret is shown only when made, so the first installation's client would be useless to the next."""
    if reg.client_id:
        existing = await repo.client_by_id(session, reg.client_id)
    elif reg.token_endpoint_auth_method in SECRET_METHODS:
        existing = None
    else:
        existing = await repo.client_by_fingerprint(session, reg.fingerprint)
    if existing is not None:
        return _registered_before(existing, reg)
    secret = new_secret(CLIENT_SECRET_PREFIX) if reg.token_endpoint_auth_method in SECRET_METHODS else None
    token = new_secret(REGISTRATION_TOKEN_PREFIX)
    client = OAuthClient(
        client_id=reg.client_id or f"prism-{new_secret('')[:22]}", client_name=reg.client_name,
        redirect_uris=reg.redirect_uris, grant_types=reg.grant_types, response_types=reg.response_types,
        token_endpoint_auth_method=reg.token_endpoint_auth_method, scope=reg.scope, extra=reg.extra,
        secret_hash=hash_secret(secret) if secret else None, fingerprint=reg.fingerprint, created_at=utcnow(),
        registration_token_hash=hash_secret(token))
    try:
        async with session.begin_nested():
            session.add(client)
    except IntegrityError:
        # Registered concurrently under the same client_id (another process, or another request of this one):
        # committed now, since the insert waited for it. Answered as if it had come first.
        winner = await repo.client_by_id(session, client.client_id)
        if winner is None:
            raise
        return _registered_before(winner, reg)
    return Registered(client, secret, token, True)


def _registered_before(existing: OAuthClient, reg: ClientRegistration) -> Registered:
    if not _same_registration(existing, reg):
        # A known client_id with other redirect URIs would let anyone hijack that client's codes.
        raise invalid_metadata(f"client_id {reg.client_id!r} is already registered with other metadata")
    return Registered(existing, None, None, False)


async def authenticate_client(session: AsyncSession, client_id: str | None, secret: str | None, *,
                              described: OAuthClient | None = None, by_header: bool = True) -> OAuthClient:
    """The registered client `client_id`, its secret checked; `described` is the client a URL client_id's
    metadata document describes (fetched before the transaction: prism.oauth.client_documents). A refusal is
    401 when the client authenticated with the Authorization header (RFC 6749 5.2: it must be), else 400 (SPEC:
    "400 invalid grant or credentials"); `by_header` says which."""
    status = 401 if by_header else 400
    if not client_id:
        raise ClientCredentialMissing("client_id is required", status=status)
    if described is not None and described.client_id == client_id:
        return described  # a public client: nothing to check
    client = await repo.client_by_id(session, client_id)
    if client is None:
        raise InvalidClient("unknown client", status=status)
    if client.token_endpoint_auth_method in SECRET_METHODS:
        if not secret:
            raise ClientCredentialMissing("client authentication failed: this client authenticates with its secret",
                                          status=status)
        if client.secret_hash is None or not hmac.compare_digest(client.secret_hash, hash_secret(secret)):
            raise InvalidClient("client authentication failed", status=status)
    return client


async def create_code(session: AsyncSession, settings: Settings, *, client_id: str, user_id: str,
                      organization_ids: list[str], redirect_uri: str, redirect_uri_sent: bool, code_challenge: str,
                      scope: str, issuer: str, audience: str) -> str:
    """A code for the organizations chosen on the consent page; the first is the grant's default."""
    code = new_secret(CODE_PREFIX)
    session.add(OAuthCode(
        code_hash=hash_secret(code), client_id=client_id, user_id=user_id,
        organization_id=organization_ids[0] if organization_ids else None, organization_ids=list(organization_ids),
        redirect_uri=redirect_uri, redirect_uri_sent=redirect_uri_sent, code_challenge=code_challenge, scope=scope,
        issuer=issuer, audience=audience, expires_at=utcnow() + timedelta(seconds=settings.oauth_code_seconds)))
    await session.flush()
    return code


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class TokenContext:
    ring: KeyRing
    settings: Settings
    issuer: str  # of the host the token endpoint was called on


def may_refresh(client: OAuthClient, grant: OAuthGrant) -> bool:
    """Whether the client may use the refresh_token grant for this authorization: it registered that grant, or
    the person consented to `offline_access` (which lets a client registered for authorization_code only refresh)."""
    return "refresh_token" in client.grant_types or OFFLINE_ACCESS in grant.scope.split()


async def issue_tokens(session: AsyncSession, ctx: TokenContext, client: OAuthClient, grant: OAuthGrant,
                       scope: str) -> dict[str, Any]:
    """An access token, and a refresh token only for a client that may use one (RFC 6749 6, OAuth 2.1: a token
    the client could never present is a secret left lying around for nothing)."""
    access = await issue_access_token(
        ctx.ring, issuer=grant.issuer, subject=grant.user_id, audience=grant.audience, client_id=grant.client_id,
        scope=scope, organization_id=grant.organization_id, grant_id=grant.id,
        lifetime=ctx.settings.oauth_access_token_seconds)
    answer: dict[str, Any] = {"access_token": access, "token_type": "Bearer",
                              "expires_in": ctx.settings.oauth_access_token_seconds, "scope": scope}
    if may_refresh(client, grant):
        refresh = new_secret(REFRESH_PREFIX)
        session.add(OAuthRefreshToken(
            token_hash=hash_secret(refresh), grant_id=grant.id,
            expires_at=utcnow() + timedelta(seconds=ctx.settings.oauth_refresh_token_seconds)))
        answer["refresh_token"] = refresh
    return answer


async def _create_grant(session: AsyncSession, code: OAuthCode, now: datetime) -> OAuthGrant:
    """The grant a code becomes: its tokens act in the code's organizations only (the first one by default)."""
    grant = OAuthGrant(client_id=code.client_id, user_id=code.user_id, organization_id=code.organization_id,
                       scope=code.scope, issuer=code.issuer, audience=code.audience, created_at=now)
    session.add(grant)
    await session.flush()
    session.add_all(OAuthGrantOrganization(grant_id=grant.id, organization_id=organization_id)
                    for organization_id in code.organization_ids)
    return grant


async def exchange_code(session: AsyncSession, ctx: TokenContext, client: OAuthClient, *, code: str | None,
                        verifier: str | None, redirect_uri: str | None, resource: str | None) -> dict[str, Any]:
    if not code:
        raise OAuthError("code is required")
    row = await repo.code_by_hash(session, hash_secret(code))
    if row is None or row.client_id != client.client_id:
        raise InvalidGrant("unknown authorization code")
    now = utcnow()
    if row.used_at is not None:
        # RFC 6749 4.1.2: a replayed code revokes everything it issued.
        raise GrantReplayed("authorization code already used; the tokens it issued are revoked",
                            grant_id=row.grant_id)
    if not await repo.claim_code(session, row.id, now):
        # A concurrent exchange won the claim after `row` was read: its grant is only known now.
        raise GrantReplayed("authorization code already used; the tokens it issued are revoked",
                            grant_id=await repo.grant_of_code(session, row.id))
    try:  # a code is used once, exchanged or refused: every refusal from here on spends it
        if row.expires_at <= now:
            raise InvalidGrant("authorization code expired")
        if row.issuer != ctx.issuer:
            raise InvalidGrant("authorization code was issued on another host")
        if redirect_uri is not None and redirect_uri != row.redirect_uri:
            raise InvalidGrant("redirect_uri does not match the authorization request")
        if redirect_uri is None and row.redirect_uri_sent:
            raise InvalidGrant("redirect_uri is required: it was sent in the authorization request")
        require_granted_resource(resource, row.audience, ctx.issuer)
        if not verifier or not VERIFIER.match(verifier):
            raise InvalidGrant("code_verifier is required: 43-128 characters of A-Z a-z 0-9 - . _ ~")
        if not same_secret(s256(verifier), row.code_challenge):
            raise InvalidGrant("code_verifier does not match the code_challenge")
        if not await repo.user_is_active(session, row.user_id):
            raise InvalidGrant("the user was deactivated")
        require_registered_scope(row.scope, client.scope)  # the registration may have been narrowed (RFC 7592)
    except OAuthError as refusal:
        raise CodeRefused(refusal, code_id=row.id) from None
    grant = await _create_grant(session, row, now)
    row.grant_id = grant.id
    return await issue_tokens(session, ctx, client, grant, row.scope)


async def revoke_token(session: AsyncSession, ring: KeyRing, settings: Settings, token: str, *,
                       client: OAuthClient | None, hostname: str, issuer: str) -> str | None:
    """Revoke the grant behind a refresh or access token (RFC 7009); the grant id, or None if nothing matched.

    `client` is the authenticated client, None when the request named none: then only a public client's token
    is revoked, a confidential client's needs its secret (InvalidClient). Revoking either kind revokes the whole
    grant: its refresh tokens and every access token it issued. Only tokens of this host's authorization server
    (`issuer`; `hostname` for an access token's `iss`) are revoked here: another host's are unknown to it, as
    they are to its token endpoint.
    """
    if token.startswith(REFRESH_PREFIX):
        found = await repo.refresh_by_hash(session, hash_secret(token))
        if found is None or found[1].issuer != issuer:
            return None
        grant_id, owner = found[1].id, found[1].client_id
    else:
        try:
            claims = await verify_access_token(ring, token, hostname=hostname, scheme=settings.public_scheme,
                                               verify_exp=False)
        except Unauthenticated:
            return None
        grant_id, owner = claims.grant_id, claims.client_id
    if client is None:
        registered = await repo.client_by_id(session, owner)
        if registered is not None and registered.token_endpoint_auth_method in SECRET_METHODS:
            raise ClientCredentialMissing("this token belongs to a confidential client: authenticate with its secret")
    elif client.client_id != owner:
        return None
    await repo.revoke_grant(session, grant_id, utcnow())
    return grant_id
