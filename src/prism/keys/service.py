"""API keys: minted once in plaintext, stored as SHA-256, found by their leading characters."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import BadRequest, NotFound, PermissionDenied
from prism.kit.ids import random_token
from prism.kit.timeutil import utcnow
from prism.mcp_server.surfaces import SURFACES
from prism.models import ApiKey, Membership, Organization, Tenant, User
from prism.registry.mega_tools import PLATFORM_SCOPES

KEY_PREFIXES = ("ck", "mcp")
SECRET_LENGTH = 40
LOOKUP_LENGTH = 12  # characters after the prefix that locate the row; shown as the key's prefix
DEFAULT_SCOPES = " ".join(PLATFORM_SCOPES)
DEFAULT_KEY_NAME = "Prism agent key"


def hash_key(plaintext: str) -> str:
    # Keys carry ~238 bits of randomness: a fast hash is enough, a slow one would tax every request.
    return hashlib.sha256(plaintext.encode()).hexdigest()


def lookup_of(plaintext: str) -> str | None:
    prefix, sep, secret = plaintext.partition("_")
    if not sep or prefix not in KEY_PREFIXES or len(secret) != SECRET_LENGTH or not secret.isalnum():
        return None
    return f"{prefix}_{secret[:LOOKUP_LENGTH]}"


def keys_match(stored_hash: str, plaintext: str) -> bool:
    return hmac.compare_digest(stored_hash, hash_key(plaintext))


def check_tool_surface(surface: str | None) -> str | None:
    """A key's MCP tool surface option: one of SURFACES, or None (empty) for the deployment's setting."""
    if surface is None or not surface.strip():
        return None
    if surface.strip() not in SURFACES:
        raise BadRequest(f"tool_surface: {surface!r} is not a tool surface; one of {', '.join(SURFACES)}, or "
                         "none for the deployment's setting", code="invalid_tool_surface", field="tool_surface")
    return surface.strip()


def normalize_scopes(scopes: str | None) -> str:
    if scopes is None or not scopes.strip():
        return DEFAULT_SCOPES
    requested = scopes.replace(",", " ").split()
    unknown = [s for s in requested if s not in PLATFORM_SCOPES]
    if unknown:
        raise BadRequest(f"unknown scopes {unknown}; allowed: {' '.join(PLATFORM_SCOPES)}",
                         code="invalid_scope")
    return " ".join(s for s in PLATFORM_SCOPES if s in requested)


def check_key_options(prefix: str, expires_days: int | None) -> None:
    if prefix not in KEY_PREFIXES:
        raise BadRequest(f"key prefix must be one of {KEY_PREFIXES}", code="invalid_prefix")
    if expires_days is not None and not 1 <= expires_days <= 3650:
        raise BadRequest("expires_days must be between 1 and 3650", code="invalid_expiry")


@dataclass(frozen=True)
class MintedKey:
    key: ApiKey
    plaintext: str


async def create_key(session: AsyncSession, *, tenant: Tenant, user: User, organization: Organization,
                     name: str | None = None, scopes: str | None = None, expires_days: int | None = None,
                     prefix: str = "ck", tool_surface: str | None = None) -> MintedKey:
    check_key_options(prefix, expires_days)
    if organization.tenant_id != tenant.id:
        raise NotFound("organization not found in this tenant", code="organization_not_found")
    membership = (await session.execute(select(Membership.id).where(
        Membership.user_id == user.id, Membership.organization_id == organization.id))).first()
    if membership is None:
        raise PermissionDenied(f"{user.email} is not a member of {organization.slug}", code="not_a_member")
    name = (name or DEFAULT_KEY_NAME).strip()[:255] or DEFAULT_KEY_NAME
    plaintext = f"{prefix}_{random_token(SECRET_LENGTH)}"
    now = utcnow()
    key = ApiKey(
        tenant_id=tenant.id, organization_id=organization.id, user_id=user.id, name=name, prefix=prefix,
        lookup=lookup_of(plaintext), key_hash=hash_key(plaintext), scopes=normalize_scopes(scopes),
        created_at=now, expires_at=now + timedelta(days=expires_days) if expires_days else None,
        tool_surface=check_tool_surface(tool_surface),
    )
    session.add(key)
    await session.flush()
    return MintedKey(key, plaintext)


async def find_tenant_key(session: AsyncSession, *, tenant: Tenant, key_ref: str) -> ApiKey:
    """By key id or by its displayed prefix (lookup), within the tenant only."""
    key = (await session.execute(select(ApiKey).where(
        ApiKey.tenant_id == tenant.id, (ApiKey.id == key_ref) | (ApiKey.lookup == key_ref)))
    ).scalar_one_or_none()
    if key is None:
        raise NotFound(f"key {key_ref!r} not found in tenant {tenant.subdomain!r}", code="key_not_found")
    return key


async def revoke_key(session: AsyncSession, *, tenant: Tenant, key_ref: str) -> ApiKey:
    """By key id or by its displayed prefix (lookup), within the tenant only."""
    key = await find_tenant_key(session, tenant=tenant, key_ref=key_ref)
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        await session.flush()
    return key


def key_status(key: ApiKey, now: datetime, *, holder_may_use: bool = True) -> str:
    """active, revoked, expired or suspended: whether the key still authenticates, and if not, why. `holder_may_use`:
    whether its user is active and a member of its organization; a live key of a holder who is neither is
    `suspended` (the authenticator refuses it; activating the user restores it)."""
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at is not None and key.expires_at <= now:
        return "expired"
    return "active" if holder_may_use else "suspended"


@dataclass(frozen=True, slots=True)
class ListedKey:
    key: ApiKey
    email: str
    organization: Organization
    # The key's user is active and a member of the key's organization (else the key authenticates nobody).
    holder_may_use: bool

    def status(self, now: datetime) -> str:
        return key_status(self.key, now, holder_may_use=self.holder_may_use)


async def tenant_keys(session: AsyncSession, *, tenant: Tenant, organization: Organization | None = None,
                      user: User | None = None) -> list[ListedKey]:
    """Every key of the tenant, or of one of its organizations or users, newest first, with its holder."""
    is_member = exists().where(Membership.user_id == ApiKey.user_id,
                               Membership.organization_id == ApiKey.organization_id)
    stmt = (select(ApiKey, User.email, Organization, User.is_active, is_member.label("is_member"))
            .join(User, User.id == ApiKey.user_id).join(Organization, Organization.id == ApiKey.organization_id)
            .where(ApiKey.tenant_id == tenant.id).order_by(ApiKey.created_at.desc(), ApiKey.id))
    if organization is not None:
        stmt = stmt.where(ApiKey.organization_id == organization.id)
    if user is not None:
        stmt = stmt.where(ApiKey.user_id == user.id)
    return [ListedKey(key, email, org, bool(active and member))
            for key, email, org, active, member in (await session.execute(stmt)).all()]


async def touch_keys(session: AsyncSession, used: dict[str, datetime]) -> None:
    """Write batched last_used_at values (one statement per key, never once per request).

    In key id order: every process flushes its own batch, and two transactions that lock the same keys in
    different orders deadlock on PostgreSQL. A value only moves forward: another process may have written a later
    use of the key first."""
    for key_id in sorted(used):
        when = used[key_id]
        await session.execute(update(ApiKey).where(
            ApiKey.id == key_id, or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < when))
            .values(last_used_at=when))
