"""The resource side: an access token presented as Bearer → AuthContext.

The signature, issuer, audience and expiry are checked on every request with no database access. The
grant behind the token (revocation, the user's membership and role) is one indexed read by primary key,
kept in process for `credential_cache_seconds` like API keys; a revocation made in this process is seen
at once, one made in another process within that window.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import PermissionSet
from prism.config import Settings
from prism.db import Database
from prism.errors import Unauthenticated
from prism.oauth.errors import SessionIncomplete
from prism.oauth.keys import KeyRing
from prism.oauth.models import OAuthGrant
from prism.oauth.repository import GRANT_CONTEXT_QUERY
from prism.oauth.tokens import AccessClaims, verify_access_token
from prism.registry.mega_tools import PLATFORM_SCOPES
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

    async def authenticate(self, token: str, host: HostInfo) -> AuthContext:
        claims, row = await self.claims(token, host)
        if row.organization_id is None or claims.organization_id is None:
            raise SessionIncomplete("this token carries no organization: authorize again and pick an organization "
                                    "on the consent page")
        if row.role is None:
            raise _invalid("the token's user is no longer a member of its organization")
        if host.kind == "tenant" and host.subdomain != row.subdomain:
            raise _invalid("this credential belongs to another tenant")
        patterns = tuple(row.permissions)
        permissions = self._permission_sets.setdefault(patterns, PermissionSet(patterns))
        created: datetime = row.created_at
        return AuthContext(
            tenant_id=row.tenant_id, tenant_subdomain=row.subdomain, tenant_name=row.tenant_name,
            organization_id=row.organization_id, organization_name=row.org_name, user_id=row.user_id,
            user_email=row.email, role=row.role, permissions=permissions,
            scopes=frozenset(s for s in claims.scope.split() if s in PLATFORM_SCOPES), credential_kind="oauth",
            credential_id=row.id, key_prefix=claims.client_id, key_name=row.client_name or claims.client_id,
            key_created_at=created, usage=KeyUsage(None), client_id=claims.client_id,
        )
