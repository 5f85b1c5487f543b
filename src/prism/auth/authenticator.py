"""Bearer API key or OAuth access token → AuthContext, with a short in-process cache.

API keys (`ck_`, `mcp_`) take the fast path below; anything else is treated as an OAuth access token and
verified by `prism.oauth.resource.AccessTokens` (RS256 JWT, issuer of the host, audience, expiry, grant).

The cache keeps a verified key for `credential_cache_seconds`; the hash is still compared on every
request and expiry is checked against the clock, so a cached entry never outlives its key. A revocation
(made by the CLI, another process) is seen within the TTL. Only keys used within that window are held
(prism.kit.expiring, at most MAX_CACHED_KEYS): the cache does not grow with every key the process has seen.
`peek` answers from the cache alone, awaiting and changing nothing, by the same evaluation of the cached entry as
`authenticate` (`_accepted`): the edge counts a caller it finds in one step of the limiter (prism.edge.stack).
`last_used_at` is collected in memory, to the second, and written in batches by `flush_touches`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import permission_set
from prism.config import Settings, get_settings
from prism.errors import CredentialNoLongerValid, CredentialOfAnotherTenant, TenantNotFound, Unauthenticated
from prism.keys.service import KEY_PREFIXES, keys_match, lookup_of, touch_keys
from prism.kit.expiring import ExpiringMap
from prism.kit.timeutil import utcnow
from prism.models import ApiKey, Membership, Organization, Role, Tenant, User
from prism.oauth.resource import AccessTokens
from prism.storage import Database
from prism.tenancy.hosts import HostInfo


@dataclass(slots=True)
class _Cached:
    key_hash: str
    # None when the key no longer works (revoked, its user inactive or no longer a member): `refusal` says why.
    context: AuthContext | None
    # POSIX seconds, compared with time.time(): no datetime is built per request to check it.
    expires_at: float | None
    fetched: float
    # time.monotonic() of the use last recorded in `last_used_at` (-inf: none yet by this entry).
    touched: float = float("-inf")
    refusal: str | None = None


# Subdomains whose existence is remembered (found or not) for `cache_seconds`.
MAX_TENANT_HOSTS = 10_000
# Keys remembered at once: those used within `cache_seconds` (an older entry is read again anyway, so it is dropped),
# at most this many (a few KB each). More distinct keys than this within `cache_seconds` cost a read each.
MAX_CACHED_KEYS = 10_000

_KEY_QUERY = (
    select(ApiKey.id, ApiKey.key_hash, ApiKey.scopes, ApiKey.name, ApiKey.lookup, ApiKey.created_at,
           ApiKey.expires_at, ApiKey.last_used_at, ApiKey.revoked_at, ApiKey.organization_id,
           ApiKey.persona_id, ApiKey.ai_system_id, ApiKey.tool_surface,
           User.id.label("user_id"), User.email, User.is_active, Role.name.label("role"),
           Role.permissions, Organization.name.label("org_name"), Tenant.id.label("tenant_id"),
           Tenant.subdomain, Tenant.name.label("tenant_name"))
    .join(User, User.id == ApiKey.user_id)
    .join(Organization, Organization.id == ApiKey.organization_id)
    .join(Tenant, Tenant.id == ApiKey.tenant_id)
    .outerjoin(Membership, (Membership.user_id == ApiKey.user_id)
               & (Membership.organization_id == ApiKey.organization_id))
    .outerjoin(Role, Role.id == Membership.role_id)
)


KEY_TOKEN_PREFIXES = tuple(f"{p}_" for p in KEY_PREFIXES)
# A key's `last_used_at` is recorded to this resolution: at most once a second per key, not on every request.
TOUCH_RESOLUTION_SECONDS = 1.0


def _invalid(reason: str) -> Unauthenticated:
    return Unauthenticated(reason, code="invalid_token")


def _bearer_token(authorization: str) -> str | None:
    """The credential of an `Authorization: Bearer <credential>` header; None for another scheme or none."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _accepted(cached: _Cached, token: str, host: HostInfo) -> AuthContext:
    """The caller of the API key `token` by its cached entry, or why it is refused: `Unauthenticated` for a wrong
    secret (a guess), `CredentialNoLongerValid` for a key Prism issued that no longer works or works on another
    tenant's host only. Awaits nothing."""
    if not keys_match(cached.key_hash, token):
        raise _invalid("invalid API key")
    # From here the caller holds a key Prism issued: a key that no longer works is not a guess.
    if cached.refusal is not None:
        raise CredentialNoLongerValid(cached.refusal)
    if cached.expires_at is not None and cached.expires_at <= time.time():
        raise CredentialNoLongerValid("API key expired")
    context = cached.context
    assert context is not None
    if host.kind == "tenant" and host.subdomain != context.tenant_subdomain:
        raise CredentialOfAnotherTenant("this credential belongs to another tenant")
    return context


class Authenticator:
    def __init__(self, db: Database, *, cache_seconds: float, settings: Settings | None = None) -> None:
        self.db = db
        self.tokens = AccessTokens(db, settings or get_settings())
        self.cache_seconds = cache_seconds
        self._cache: ExpiringMap[str, _Cached] = ExpiringMap(MAX_CACHED_KEYS, cache_seconds,
                                                             lambda cached: cached.fetched)
        # Any request may name any subdomain (the edge checks every tenant host): bounded the same way.
        self._tenants: ExpiringMap[str, tuple[bool, float]] = ExpiringMap(MAX_TENANT_HOSTS, cache_seconds,
                                                                          lambda hit: hit[1])
        self._touches: dict[str, datetime] = {}  # uses not yet written to the database
        # Counts `forget_key` calls: a load that a forget overtook read the key as it was before, and must not
        # put that back in the cache (it would work for another `cache_seconds` where it was just revoked).
        self._forgets = 0

    async def authenticate(self, authorization: str | None, host: HostInfo,
                           organization_context: str | None = None) -> AuthContext:
        """`organization_context` (the X-Organization-Context header) picks the organization of an OAuth
        token's user; API keys are bound to one organization and ignore it."""
        if host.kind == "tenant":
            await self.require_tenant_host(host)
        if not authorization:
            raise Unauthenticated("Authorization: Bearer <key> is required", code="authentication_required")
        token = _bearer_token(authorization)
        if token is None:
            raise Unauthenticated("use the Bearer scheme: Authorization: Bearer <key>",
                                  code="authentication_required")
        if not token.startswith(KEY_TOKEN_PREFIXES):
            return await self.tokens.authenticate(token, host, organization_context)
        lookup = lookup_of(token)
        if lookup is None:
            raise _invalid("malformed API key")
        cached = self._cache.get(lookup)
        now = time.monotonic()
        if cached is None or now - cached.fetched > self.cache_seconds:
            cached = await self._load(lookup)
        context = _accepted(cached, token, host)
        self._touch(cached, context, now)
        return context

    def peek(self, authorization: str | None, host: HostInfo) -> AuthContext | None:
        """The caller `authenticate` would accept without awaiting anything, or None: an API key whose cached
        entry is fresh and accepts it (on a tenant host whose existence is cached too). Changes nothing, and
        checks no secret against the database: a miss, a token, a key the entry refuses are all None, for
        `authenticate` to answer. The edge counts a caller found here in one step of the limiter
        (prism.edge.stack); `record_use` then records the key's use, as `authenticate` does."""
        if host.kind == "tenant":
            assert host.subdomain is not None
            known = self._tenants.get(host.subdomain)
            if known is None or not known[0] or time.monotonic() - known[1] > self.cache_seconds:
                return None
        token = _bearer_token(authorization) if authorization else None
        if token is None or not token.startswith(KEY_TOKEN_PREFIXES):
            return None
        lookup = lookup_of(token)
        cached = self._cache.get(lookup) if lookup is not None else None
        if cached is None or time.monotonic() - cached.fetched > self.cache_seconds:
            return None
        try:
            return _accepted(cached, token, host)
        except Unauthenticated:  # a wrong secret, or a key that no longer works: `authenticate` says which
            return None

    @staticmethod
    def presents_api_key(authorization: str) -> bool:
        """Whether the header presents an API key: a random secret a guess is checked against. An OAuth access
        token is a signature over its claims (no guess produces one), and another scheme is never accepted."""
        token = _bearer_token(authorization)
        return token is not None and token.startswith(KEY_TOKEN_PREFIXES)

    def record_use(self, context: AuthContext) -> None:
        """Record the use of a key `peek` accepted in its `last_used_at`, as `authenticate` does."""
        cached = self._cache.get(context.key_prefix)
        if cached is not None and cached.context is context:
            self._touch(cached, context, time.monotonic())

    def _touch(self, cached: _Cached, context: AuthContext, now: float) -> None:
        if now - cached.touched >= TOUCH_RESOLUTION_SECONDS:
            cached.touched = now
            context.usage.last_used_at = self._touches[context.credential_id] = utcnow()

    def forget_key(self, lookup: str) -> None:
        """Drop a cached key at once (it was just revoked here); other processes drop theirs within
        `cache_seconds`."""
        self._forgets += 1
        self._cache.pop(lookup)

    async def require_tenant_host(self, host: HostInfo) -> None:
        assert host.subdomain is not None
        hit = self._tenants.get(host.subdomain)
        now = time.monotonic()
        if hit is None or now - hit[1] > self.cache_seconds:
            async with self.db.read() as session:
                found = (await session.execute(
                    select(Tenant.id).where(Tenant.subdomain == host.subdomain))).first() is not None
            hit = (found, now)
            self._tenants.put(host.subdomain, hit)
        if not hit[0]:
            raise TenantNotFound(f"no tenant at {host.hostname}")

    async def _load(self, lookup: str) -> _Cached:
        forgets = self._forgets
        async with self.db.read() as session:
            row = (await session.execute(_KEY_QUERY.where(ApiKey.lookup == lookup))).first()
        kept = self._forgets == forgets  # overtaken by a forget: answer this request, keep nothing
        if row is None:
            self._cache.pop(lookup)
            raise _invalid("invalid API key")
        # Why a key no longer works is told only to a caller whose key matches the hash (see authenticate):
        # anyone else guessing a prefix gets "invalid API key" and counts toward the lockout.
        refusal = ("API key revoked" if row.revoked_at is not None else "user is inactive" if not row.is_active
                   else "the key's user is no longer a member of its organization" if row.role is None else None)
        if refusal is not None:
            cached = _Cached(row.key_hash, None, None, time.monotonic(), refusal=refusal)
            if kept:
                self._cache.put(lookup, cached)
            return cached
        patterns = tuple(row.permissions)
        permissions = permission_set(patterns)
        context = AuthContext(
            tenant_id=row.tenant_id, tenant_subdomain=row.subdomain, tenant_name=row.tenant_name,
            organization_id=row.organization_id, organization_name=row.org_name, user_id=row.user_id,
            user_email=row.email, role=row.role, permissions=permissions,
            scopes=frozenset(row.scopes.split()), credential_kind="api_key", credential_id=row.id,
            key_prefix=row.lookup, key_name=row.name, key_created_at=row.created_at,
            usage=KeyUsage(row.last_used_at), persona_id=row.persona_id, ai_system_id=row.ai_system_id,
            tool_surface=row.tool_surface,
        )
        expires_at = row.expires_at.timestamp() if row.expires_at is not None else None
        cached = _Cached(row.key_hash, context, expires_at, time.monotonic())
        if kept:
            self._cache.put(lookup, cached)
        return cached

    async def flush_touches(self) -> None:
        if not self._touches:
            return
        pending, self._touches = self._touches, {}
        async with self.db.write() as session:
            await touch_keys(session, pending)
