"""The resource side: an access token presented as Bearer → AuthContext.

The signature, issuer, audience and expiry are checked on every request with no database access. The
grant behind the token (revocation, its user, the organizations the user consented it for and the user's
membership and role in each of them today) is read by grant id, kept in process for
`credential_cache_seconds` like API keys; a revocation made in this process is seen at once, one made in
another process within that window, and so is a membership ended or a role changed. So is the persona and AI
system the organization ties the token's client to (`ClientGovernance`): one more indexed read, cached the
same way. Both are dropped once that window has passed (prism.kit.expiring): the process holds the grants used
lately, not every grant it ever saw.

A token acts only in its grant's organizations: in the default one when the request names none, else in the
one `X-Organization-Context` names, which must be one of them (403 organization_not_consented) and one the
user is still a member of (403 organization_forbidden).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import permission_set
from prism.config import Settings
from prism.errors import (
    BadRequest,
    CredentialNoLongerValid,
    CredentialOfAnotherTenant,
    PermissionDenied,
    Unauthenticated,
)
from prism.governance.models import ClientGovernance
from prism.kit.expiring import ExpiringMap
from prism.kit.ids import stored_organization_id
from prism.oauth.errors import SessionIncomplete
from prism.oauth.keys import KeyRing
from prism.oauth.models import OAuthGrant, OAuthGrantOrganization
from prism.oauth.repository import CONSENTED_MEMBERSHIPS_QUERY, GRANT_CONTEXT_QUERY
from prism.oauth.schemas import APP_SCOPE, TOOL_SURFACE_FIELD
from prism.oauth.tokens import AccessClaims, verify_access_token
from prism.registry.mega_tools import PLATFORM_SCOPES
from prism.storage import Database
from prism.tenancy.hosts import HostInfo

# Grants, and (client, organization) governance rows, remembered at once: those read within
# `credential_cache_seconds`, at most this many of each (a few KB a grant).
MAX_CACHED_GRANTS = 10_000


@dataclass(frozen=True, slots=True)
class _Grant:
    row: Any  # a GRANT_CONTEXT_QUERY row, or None for an unknown grant
    # organization id → a CONSENTED_MEMBERSHIPS_QUERY row (role None: the user is no longer a member there)
    organizations: dict[str, Any]
    fetched: float


@dataclass(frozen=True, slots=True)
class _Cached:
    row: Any
    fetched: float


def _invalid(message: str) -> Unauthenticated:
    return Unauthenticated(message, code="invalid_token")


class AccessTokens:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.ring = KeyRing(db, settings)
        ttl = settings.credential_cache_seconds
        self._grants: ExpiringMap[str, _Grant] = ExpiringMap(MAX_CACHED_GRANTS, ttl, lambda hit: hit.fetched)
        # (client_id, organization_id) -> the organization's persona and AI system for the client's tokens
        self._governance: ExpiringMap[tuple[str, str], _Cached] = ExpiringMap(MAX_CACHED_GRANTS, ttl,
                                                                              lambda hit: hit.fetched)
        # Counts `forget` calls: a read that a forget overtook saw the grant before its revocation, and must not
        # put it back in the cache (it would work for another `credential_cache_seconds` here).
        self._forgets = 0

    def forget(self, grant_id: str) -> None:
        """Drop a cached grant (after revoking it here) so the next request sees the revocation."""
        self._forgets += 1
        self._grants.pop(grant_id)

    async def _grant(self, grant_id: str) -> _Grant:
        hit = self._grants.get(grant_id)
        if hit is None or time.monotonic() - hit.fetched > self.settings.credential_cache_seconds:
            forgets = self._forgets
            async with self.db.read() as session:
                row = (await session.execute(GRANT_CONTEXT_QUERY.where(OAuthGrant.id == grant_id))).first()
                consented = (await session.execute(CONSENTED_MEMBERSHIPS_QUERY.where(
                    OAuthGrantOrganization.grant_id == grant_id))).all()
            hit = _Grant(row, {org.organization_id: org for org in consented}, time.monotonic())
            if self._forgets == forgets:  # overtaken by a revocation: answer this request, keep nothing
                self._grants.put(grant_id, hit)
        return hit

    async def _verified(self, token: str, host: HostInfo) -> tuple[AccessClaims, _Grant]:
        claims = await verify_access_token(self.ring, token, hostname=host.hostname,
                                           scheme=self.settings.public_scheme)
        grant = await self._grant(claims.grant_id)
        row = grant.row
        # The signature held, so the token is one of ours: a grant gone or revoked is not a guess.
        if row is None or row.revoked_at is not None:
            raise CredentialNoLongerValid("access token revoked")
        if not row.is_active:
            raise CredentialNoLongerValid("user is inactive")
        if row.user_id != claims.subject or row.client_id != claims.client_id:
            raise _invalid("access token does not match its grant")
        return claims, grant

    async def claims(self, token: str, host: HostInfo) -> tuple[AccessClaims, Any]:
        """Verified claims and the live grant row; refuses revoked grants and inactive users."""
        claims, grant = await self._verified(token, host)
        return claims, grant.row

    async def authenticate(self, token: str, host: HostInfo, organization_context: str | None = None) -> AuthContext:
        """The token's caller in one of the organizations its grant was consented for: the default one, or the
        one named by `X-Organization-Context` (see `organization_id_of` for the accepted forms)."""
        claims, grant = await self._verified(token, host)
        row = grant.row
        if organization_context:
            organization_id = organization_id_of(organization_context)
            if organization_id not in grant.organizations:
                raise PermissionDenied("X-Organization-Context names an organization this token was not consented "
                                       "for: authorize again and choose it on the consent page",
                                       code="organization_not_consented")
        elif row.organization_id is None or claims.organization_id is None:
            raise SessionIncomplete("this token carries no organization: authorize again and choose an "
                                    "organization on the consent page")
        else:
            organization_id = row.organization_id
        org = grant.organizations.get(organization_id)
        if org is None or org.role is None:
            raise PermissionDenied("the token's user is no longer a member of this organization",
                                   code="organization_forbidden")
        if host.kind == "tenant" and host.subdomain != org.subdomain:
            raise CredentialOfAnotherTenant("this credential belongs to another tenant")
        patterns = tuple(org.permissions)
        permissions = permission_set(patterns)
        created: datetime = row.created_at
        governance = await self._client_governance(claims.client_id, org.organization_id)
        return AuthContext(
            tenant_id=org.tenant_id, tenant_subdomain=org.subdomain, tenant_name=org.tenant_name,
            organization_id=org.organization_id, organization_name=org.org_name, user_id=row.user_id,
            user_email=row.email, role=org.role, permissions=permissions,
            scopes=_scopes(claims.scope), credential_kind="oauth",
            credential_id=row.id, key_prefix=claims.client_id, key_name=row.client_name or claims.client_id,
            key_created_at=created, usage=KeyUsage(None), client_id=claims.client_id,
            persona_id=governance.persona_id if governance else None,
            ai_system_id=governance.ai_system_id if governance else None,
            tool_surface=(row.client_extra or {}).get(TOOL_SURFACE_FIELD),
        )

    async def _client_governance(self, client_id: str, organization_id: str) -> Any:
        """The organization's persona and AI system for this client's tokens (a row), or None."""
        key = (client_id, organization_id)
        hit = self._governance.get(key)
        if hit is None or time.monotonic() - hit.fetched > self.settings.credential_cache_seconds:
            async with self.db.read() as session:
                row = (await session.execute(
                    select(ClientGovernance.persona_id, ClientGovernance.ai_system_id).where(
                        ClientGovernance.client_id == client_id,
                        ClientGovernance.organization_id == organization_id))).first()
            hit = _Cached(row, time.monotonic())
            self._governance.put(key, hit)
        return hit.row


def _scopes(scope: str) -> frozenset[str]:
    """The token's platform and per-app scopes: both decide what it may call (prism.registry.mega_tools
    `scopes_allow`), within the user's role."""
    return frozenset(s for s in scope.split() if s in PLATFORM_SCOPES or APP_SCOPE.match(s))


def organization_id_of(value: str) -> str:
    """The organization an X-Organization-Context value names: its id as a UUID in any form Python's `uuid`
    reads (hyphenated or 32 hex digits, either case, in braces or as `urn:uuid:`), optionally after `org_`
    (the prefixed form, `org_<hex>`); surrounding whitespace is ignored."""
    stored = stored_organization_id(value)
    if stored is None:
        raise BadRequest("X-Organization-Context must be an organization id (a UUID, or org_<hex>)",
                         code="invalid_organization_context", field="X-Organization-Context")
    return stored
