"""The refresh_token grant: rotation, a grace window for concurrent refreshes, idle and absolute lifetimes.

Every refresh rotates: the presented token is spent and a new pair (access and refresh token) is issued. A
spent token presented again normally means someone holds a copy, and the whole grant is revoked. But two
tabs or two workers of one client often refresh with the same token at the same moment; the second would
log the user out. So a spent token presented again by the same client, on the same host, within
PRISM_OAUTH_REFRESH_GRACE_SECONDS of its rotation answers the pair that rotation issued. Anything else (later,
another client, another host) still revokes the grant.

The pair is kept beside the spent token, encrypted (AES-256-GCM) under a key derived from the master secret
*and the spent refresh token itself*. The database holds only that token's SHA-256, so neither a copy of the
database nor a copy of the database with the master secret opens the pair: only someone presenting the spent
token within the window does, and that is exactly who the window answers. Pairs are cleared once past the
window (at the grant's next rotation).

Lifetimes: a refresh token lives PRISM_OAUTH_REFRESH_TOKEN_SECONDS from its issue (idle: each rotation starts
it again); the grant itself ends PRISM_OAUTH_GRANT_MAX_AGE_DAYS after the user consented, however often it is
refreshed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from prism.config import Settings
from prism.kit.secret import Undecryptable, decrypt, derived_key, encrypt
from prism.kit.timeutil import utcnow
from prism.oauth import repository as repo
from prism.oauth.errors import GrantReplayed, InvalidGrant, OAuthError
from prism.oauth.issuer import require_granted_resource
from prism.oauth.models import OAuthClient, OAuthGrant, OAuthRefreshToken
from prism.oauth.schemas import OFFLINE_ACCESS, normalize_scope, require_registered_scope, scopes_beyond
from prism.oauth.service import TokenContext, issue_tokens, may_refresh
from prism.oauth.tokens import hash_secret


async def refresh_tokens(session: AsyncSession, ctx: TokenContext, client: OAuthClient, *,
                         refresh_token: str | None, scope: str | None, resource: str | None) -> dict[str, Any]:
    if not refresh_token:
        raise OAuthError("refresh_token is required")
    found = await repo.refresh_by_hash(session, hash_secret(refresh_token))
    if found is None:
        raise InvalidGrant("unknown refresh token")
    token, grant = found
    # Whose token it is comes first: a spent one in another client's hands was copied, and the family is
    # revoked whatever that client may do; a live one is unknown to it (answered as a made-up token is).
    if grant.client_id != client.client_id:
        if token.used_at is not None:
            raise GrantReplayed("refresh token already used; every token of this authorization is revoked",
                                grant_id=grant.id)
        raise InvalidGrant("unknown refresh token")
    if not may_refresh(client, grant):
        raise OAuthError("this client is not registered for the refresh_token grant and did not ask for "
                         "offline_access", code="unauthorized_client")
    if token.used_at is None:
        now = utcnow()
        _refuse_unusable(ctx, grant, token, now)
        if not await repo.user_is_active(session, grant.user_id):  # refused, not spent: activation restores it
            raise InvalidGrant("the user was deactivated")
        require_granted_resource(resource, grant.audience, ctx.issuer)
        wanted = _narrowed_scope(grant, client, scope)
        # Atomic: of two concurrent refreshes exactly one claims; the other (on PostgreSQL, once this
        # transaction commits, as it waits for the row) answers again below.
        if await repo.claim_refresh(session, token.id, now):
            answer = await issue_tokens(session, ctx, client, grant, wanted)
            await repo.store_successor(session, token.id, _seal(ctx.settings, refresh_token, token.id, answer))
            grace = timedelta(seconds=ctx.settings.oauth_refresh_grace_seconds)
            await repo.forget_successors(session, grant.id, used_before=now - grace)
            return answer
    return await _answer_again(session, ctx, grant, token.id, refresh_token)


async def _answer_again(session: AsyncSession, ctx: TokenContext, grant: OAuthGrant, token_id: str,
                        refresh_token: str) -> dict[str, Any]:
    """A spent token came back: the pair its rotation issued when within the grace window, else revocation."""
    if grant.revoked_at is not None:
        raise InvalidGrant("the authorization was revoked")
    used_at, sealed = await repo.successor_of(session, token_id)
    age = (utcnow() - used_at).total_seconds() if used_at is not None else math.inf
    answer = None
    if age < ctx.settings.oauth_refresh_grace_seconds and sealed is not None and grant.issuer == ctx.issuer:
        answer = _open(ctx.settings, refresh_token, token_id, sealed)
    if answer is None:
        raise GrantReplayed("refresh token already used; every token of this authorization is revoked",
                            grant_id=grant.id)
    # Refused as the fresh token is (docs/oauth.md: a deactivated user refreshes nothing), and not revoked: within
    # the window this is the client's own concurrent refresh, not a copy.
    if not await repo.user_is_active(session, grant.user_id):
        raise InvalidGrant("the user was deactivated")
    # The same tokens, so the access token has aged since: say how long it has left.
    answer["expires_in"] = max(0, int(answer["expires_in"] - age))
    return answer


def _refuse_unusable(ctx: TokenContext, grant: OAuthGrant, token: OAuthRefreshToken, now: datetime) -> None:
    if grant.revoked_at is not None:
        raise InvalidGrant("the authorization was revoked")
    if token.expires_at <= now:
        raise InvalidGrant("refresh token expired")
    max_age = timedelta(days=ctx.settings.oauth_grant_max_age_days)
    if grant.created_at + max_age <= now:
        raise InvalidGrant(f"the authorization is older than {ctx.settings.oauth_grant_max_age_days:g} days: "
                           "authorize again")
    if grant.issuer != ctx.issuer:
        raise InvalidGrant("refresh token was issued on another host")


def _narrowed_scope(grant: OAuthGrant, client: OAuthClient, scope: str | None) -> str:
    """The scope asked, within the grant's and the client's registered scope (invalid_scope beyond either); none
    asked, the grant's, less what the client's registration no longer covers (it may have been narrowed since the
    consent, or the grant made before registered scopes were a ceiling)."""
    granted = grant.scope.split()
    wanted = normalize_scope(scope)
    if wanted is not None:
        if any(s not in granted for s in wanted.split()):
            raise OAuthError("a refresh cannot widen the granted scope", code="invalid_scope")
        require_registered_scope(wanted, client.scope)
        return wanted
    beyond = scopes_beyond(grant.scope, client.scope)
    kept = [s for s in granted if s not in beyond]
    if not any(s != OFFLINE_ACCESS for s in kept):
        raise OAuthError(f"the granted scope ({grant.scope}) is beyond the scope this client registered "
                         f"({client.scope}): authorize again", code="invalid_scope")
    return " ".join(kept)


def _key(settings: Settings, refresh_token: str) -> bytes:
    """A key only the spent refresh token opens (the database holds its hash, never the token)."""
    master = derived_key(settings, "oauth-refresh-successor")
    return hmac.new(master, refresh_token.encode(), hashlib.sha256).digest()


def _seal(settings: Settings, refresh_token: str, token_id: str, answer: dict[str, Any]) -> str:
    # Bound to the token's row: a sealed pair copied onto another row does not open.
    return encrypt(_key(settings, refresh_token), orjson.dumps(answer), token_id)


def _open(settings: Settings, refresh_token: str, token_id: str, stored: str) -> dict[str, Any] | None:
    try:
        plain = decrypt(_key(settings, refresh_token), stored, token_id)
    except Undecryptable:  # another master secret: no pair to give, so the reuse is treated as one
        return None
    answer = orjson.loads(plain)
    return answer if isinstance(answer, dict) else None
