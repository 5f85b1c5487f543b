"""The resource side: an access token presented as Bearer → AuthContext.

The signature, issuer, audience and expiry are checked on every request with no database access. The
grant behind the token (revocation, the user's membership and role) is one indexed read by primary key,
kept in process for `credential_cache_seconds` like API keys; a revocation made in this process is seen
at once, one made in another process within that window. So is the persona and AI system the organization
ties the token's client to (`ClientGovernance`): one more indexed read, cached the same way.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import PermissionSet
from prism.config import Settings
from prism.errors import BadRequest, PermissionDenied, Unauthenticated
from prism.governance.models import ClientGovernance
from prism.models import Membership
from prism.oauth.errors import SessionIncomplete
from prism.oauth.keys import KeyRing
from prism.oauth.models import OAuthGrant
from prism.oauth.repository import GRANT_CONTEXT_QUERY, MEMBERSHIP_CONTEXT_QUERY
from prism.oauth.tokens import AccessClaims, verify_access_token
from prism.registry.mega_tools import PLATFORM_SCOPES
from prism.storage import Database
from prism.tenancy.hosts import HostInfo


@dataclass(frozen=True, slots=True)
class _Grant:
    row: Any  # a GRANT_CONTEXT_QUERY row; None fields when the grant has no organization
    fetched: float


def _invalid(message: str) -> Unauthenticated:
    return Unauthenticated(message, code="invalid_token")


class AccessTokens:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.ring = KeyRing(db, settings)
        self._grants: dict[str, _Grant] = {}
        self._permission_sets: dict[tuple[str, ...], PermissionSet] = {}
        self._memberships: dict[tuple[str, str], _Grant] = {}
        self._governance: dict[tuple[str, str], _Grant] = {}  # (client_id, organization_id)

    def forget(self, grant_id: str) -> None:
        """Drop a cached grant (after revoking it here) so the next request sees the revocation."""
        self._grants.pop(grant_id, None)

    async def _grant(self, grant_id: str) -> Any:
        hit = self._grants.get(grant_id)
        if hit is None or time.monotonic() - hit.fetched > self.settings.credential_cache_seconds:
            async with self.db.read() as session:
                row = (await session.execute(GRANT_CONTEXT_QUERY.where(OAuthGrant.id == grant_id))).first()
            hit = _Grant(row, time.monotonic())
            self._grants[grant_id] = hit
        return hit.row

    async def claims(self, token: str, host: HostInfo) -> tuple[AccessClaims, Any]:
        """Verified claims and the live grant row; refuses revoked grants and inactive users."""
        claims = await verify_access_token(self.ring, token, hostname=host.hostname,
                                           scheme=self.settings.public_scheme)
        row = await self._grant(claims.grant_id)
        if row is None or row.revoked_at is not None:
            raise _invalid("access token revoked")
        if not row.is_active:
            raise _invalid("user is inactive")
        if row.user_id != claims.subject or row.client_id != claims.client_id:
            raise _invalid("access token does not match its grant")
        return claims, row

    async def authenticate(self, token: str, host: HostInfo, organization_context: str | None = None) -> AuthContext:
        """The token's caller, in the grant's organization or — for a user in several — the one named by
        `X-Organization-Context` (an organization id, plain or as `org_<hex>`)."""
        claims, row = await self.claims(token, host)
        org = row
        if organization_context:
            org = await self._membership(row.user_id, organization_context)
        elif row.organization_id is None or claims.organization_id is None:
            raise SessionIncomplete("this token carries no organization: authorize again and pick an organization "
                                    "on the consent page, or name one in X-Organization-Context")
        elif row.role is None:
            raise _invalid("the token's user is no longer a member of its organization")
        if host.kind == "tenant" and host.subdomain != org.subdomain:
            raise _invalid("this credential belongs to another tenant")
        patterns = tuple(org.permissions)
        permissions = self._permission_sets.setdefault(patterns, PermissionSet(patterns))
        created: datetime = row.created_at
        governance = await self._client_governance(claims.client_id, org.organization_id)
        return AuthContext(
            tenant_id=org.tenant_id, tenant_subdomain=org.subdomain, tenant_name=org.tenant_name,
            organization_id=org.organization_id, organization_name=org.org_name, user_id=row.user_id,
            user_email=row.email, role=org.role, permissions=permissions,
            scopes=frozenset(s for s in claims.scope.split() if s in PLATFORM_SCOPES), credential_kind="oauth",
            credential_id=row.id, key_prefix=claims.client_id, key_name=row.client_name or claims.client_id,
            key_created_at=created, usage=KeyUsage(None), client_id=claims.client_id,
            persona_id=governance.persona_id if governance else None,
            ai_system_id=governance.ai_system_id if governance else None,
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
            hit = _Grant(row, time.monotonic())
            self._governance[key] = hit
        return hit.row

    async def _membership(self, user_id: str, organization_context: str) -> Any:
        organization_id = _organization_id(organization_context)
        key = (user_id, organization_id)
        hit = self._memberships.get(key)
        if hit is None or time.monotonic() - hit.fetched > self.settings.credential_cache_seconds:
            async with self.db.read() as session:
                row = (await session.execute(MEMBERSHIP_CONTEXT_QUERY.where(
                    Membership.user_id == user_id, Membership.organization_id == organization_id))).first()
            hit = _Grant(row, time.monotonic())
            self._memberships[key] = hit
        if hit.row is None:
            raise PermissionDenied("X-Organization-Context names an organization this user is not a member of",
                                   code="organization_forbidden")
        return hit.row


def _organization_id(value: str) -> str:
    text = value.strip()
    try:
        return str(uuid.UUID(text[4:] if text.startswith("org_") else text))
    except ValueError:
        raise BadRequest("X-Organization-Context must be an organization id (a UUID, or org_<hex>)",
                         code="invalid_organization_context") from None
