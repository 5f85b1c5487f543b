"""SQL of the authorization server. Credentials are found by the hash of the secret the caller presents."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.models import Membership, Organization, Role, Tenant, User
from prism.oauth.models import OAuthClient, OAuthCode, OAuthGrant, OAuthGrantOrganization, OAuthRefreshToken


async def client_by_id(session: AsyncSession, client_id: str) -> OAuthClient | None:
    return (await session.execute(select(OAuthClient).where(OAuthClient.client_id == client_id))).scalar_one_or_none()


async def client_by_fingerprint(session: AsyncSession, fingerprint: str) -> OAuthClient | None:
    return (await session.execute(select(OAuthClient).where(OAuthClient.fingerprint == fingerprint)
                                  .order_by(OAuthClient.created_at).limit(1))).scalar_one_or_none()


async def code_by_hash(session: AsyncSession, code_hash: str) -> OAuthCode | None:
    return (await session.execute(select(OAuthCode).where(OAuthCode.code_hash == code_hash))).scalar_one_or_none()


async def claim_code(session: AsyncSession, code_id: str, now: datetime) -> bool:
    """Mark a code used; False when another exchange got there first (so it is a replay)."""
    result = await session.execute(update(OAuthCode).where(OAuthCode.id == code_id, OAuthCode.used_at.is_(None))
                                   .values(used_at=now))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def grant_of_code(session: AsyncSession, code_id: str) -> str | None:
    """The grant a code produced, as committed now: read after losing a claim, so the winner's grant is seen
    (on PostgreSQL the losing UPDATE waited for the winner's commit; the code read before it is stale)."""
    return (await session.execute(select(OAuthCode.grant_id).where(OAuthCode.id == code_id))).scalar_one_or_none()


async def refresh_by_hash(session: AsyncSession, token_hash: str) -> tuple[OAuthRefreshToken, OAuthGrant] | None:
    row = (await session.execute(
        select(OAuthRefreshToken, OAuthGrant).join(OAuthGrant, OAuthGrant.id == OAuthRefreshToken.grant_id)
        .where(OAuthRefreshToken.token_hash == token_hash))).first()
    return (row[0], row[1]) if row is not None else None


async def user_is_active(session: AsyncSession, user_id: str) -> bool:
    return bool((await session.execute(select(User.is_active).where(User.id == user_id))).scalar_one_or_none())


async def claim_refresh(session: AsyncSession, token_id: str, now: datetime) -> bool:
    result = await session.execute(update(OAuthRefreshToken).where(
        OAuthRefreshToken.id == token_id, OAuthRefreshToken.used_at.is_(None)).values(used_at=now))
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def store_successor(session: AsyncSession, token_id: str, sealed: str) -> None:
    await session.execute(update(OAuthRefreshToken).where(OAuthRefreshToken.id == token_id)
                          .values(successor_sealed=sealed))


async def successor_of(session: AsyncSession, token_id: str) -> tuple[datetime | None, str | None]:
    """(used_at, successor_sealed) as committed now: read after losing a claim, so the winner's row is seen."""
    row = (await session.execute(select(OAuthRefreshToken.used_at, OAuthRefreshToken.successor_sealed)
                                 .where(OAuthRefreshToken.id == token_id))).first()
    return (row[0], row[1]) if row is not None else (None, None)


async def forget_successors(session: AsyncSession, grant_id: str, used_before: datetime) -> None:
    """Clear the sealed pairs of the grant's tokens rotated before `used_before` (past their grace window)."""
    await session.execute(update(OAuthRefreshToken).where(
        OAuthRefreshToken.grant_id == grant_id, OAuthRefreshToken.successor_sealed.is_not(None),
        OAuthRefreshToken.used_at < used_before).values(successor_sealed=None))


async def revoke_grant(session: AsyncSession, grant_id: str, now: datetime) -> None:
    await session.execute(update(OAuthGrant).where(OAuthGrant.id == grant_id, OAuthGrant.revoked_at.is_(None))
                          .values(revoked_at=now))


async def grant_by_id(session: AsyncSession, grant_id: str) -> OAuthGrant | None:
    return await session.get(OAuthGrant, grant_id)


async def organizations_of(session: AsyncSession, user_id: str, tenant_subdomain: str | None
                           ) -> list[tuple[Organization, Tenant]]:
    """The user's organizations: within one tenant on a tenant host, all of them on the platform host."""
    stmt = (select(Organization, Tenant).join(Membership, Membership.organization_id == Organization.id)
            .join(Tenant, Tenant.id == Organization.tenant_id).where(Membership.user_id == user_id)
            .order_by(Tenant.subdomain, Organization.name))
    if tenant_subdomain is not None:
        stmt = stmt.where(Tenant.subdomain == tenant_subdomain)
    return [(org, tenant) for org, tenant in (await session.execute(stmt)).all()]


# The grant behind an access token: revocation, its user, its client, and its default organization (named
# in userinfo). Where the token may act is CONSENTED_MEMBERSHIPS_QUERY's business.
GRANT_CONTEXT_QUERY = (
    select(OAuthGrant.id, OAuthGrant.revoked_at, OAuthGrant.created_at, OAuthGrant.client_id,
           OAuthGrant.organization_id, User.id.label("user_id"), User.email, User.is_active,
           OAuthClient.client_name, OAuthClient.extra.label("client_extra"), Organization.name.label("org_name"),
           Tenant.subdomain)
    .join(User, User.id == OAuthGrant.user_id)
    .outerjoin(OAuthClient, OAuthClient.client_id == OAuthGrant.client_id)
    .outerjoin(Organization, Organization.id == OAuthGrant.organization_id)
    .outerjoin(Tenant, Tenant.id == Organization.tenant_id)
)


# Each organization a grant was consented for, with the grant's user's role there today: `role` is None once
# the user is no longer a member (the token then has no power there). Filter by grant id.
CONSENTED_MEMBERSHIPS_QUERY = (
    select(Role.name.label("role"), Role.permissions, Organization.id.label("organization_id"),
           Organization.name.label("org_name"), Tenant.id.label("tenant_id"), Tenant.subdomain,
           Tenant.name.label("tenant_name"))
    .select_from(OAuthGrantOrganization)
    .join(OAuthGrant, OAuthGrant.id == OAuthGrantOrganization.grant_id)
    .join(Organization, Organization.id == OAuthGrantOrganization.organization_id)
    .join(Tenant, Tenant.id == Organization.tenant_id)
    .outerjoin(Membership, (Membership.user_id == OAuthGrant.user_id)
               & (Membership.organization_id == OAuthGrantOrganization.organization_id))
    .outerjoin(Role, Role.id == Membership.role_id)
)

