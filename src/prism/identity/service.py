"""Users (global, unique email) and their memberships in organizations."""

from __future__ import annotations

import re

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import BadRequest, Conflict, NotFound
from prism.identity.passwords import hash_password
from prism.kit.timeutil import utcnow
from prism.models import ApiKey, Membership, Organization, Role, Tenant, User
from prism.oauth.models import OAuthGrant, OAuthGrantOrganization

EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+\Z|^[^@\s]+@localhost\Z")
MIN_PASSWORD_LENGTH = 8


def normalize_email(email: str) -> str:
    email = email.strip().lower()
    if not EMAIL_PATTERN.match(email) or len(email) > 320:
        raise BadRequest(f"invalid email {email!r}", code="invalid_email")
    return email


def check_password_strength(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise BadRequest(f"password must have at least {MIN_PASSWORD_LENGTH} characters",
                         code="weak_password")


def password_hash_of(password: str) -> str:
    """A new password, checked for strength, in the form stored. Made before the write transaction that stores it:
    hashing takes about a third of a second, for which SQLite's write lock would hold up every writer."""
    check_password_strength(password)
    return hash_password(password)


async def create_user(session: AsyncSession, email: str, password_hash: str) -> User:
    """`password_hash`: `password_hash_of(password)`."""
    email = normalize_email(email)
    if await get_user(session, email) is not None:
        raise Conflict(f"user {email!r} already exists", code="user_exists")
    user = User(email=email, password_hash=password_hash)
    session.add(user)
    await session.flush()
    return user


async def set_password(session: AsyncSession, user: User, password_hash: str) -> None:
    """`password_hash`: `password_hash_of(password)`."""
    user.password_hash = password_hash
    user.sessions_ended_at = utcnow()  # a new password signs every browser out (prism.web.browser)
    await session.flush()


async def get_user(session: AsyncSession, email: str) -> User | None:
    return (await session.execute(select(User).where(User.email == email.strip().lower()))).scalar_one_or_none()


async def require_user(session: AsyncSession, email: str) -> User:
    user = await get_user(session, email)
    if user is None:
        raise NotFound(f"user {email!r} not found", code="user_not_found")
    return user


async def add_to_organization(session: AsyncSession, user: User, org: Organization, *,
                              role: str) -> Membership:
    role_row = (await session.execute(select(Role).where(
        Role.tenant_id == org.tenant_id, Role.name == role))).scalar_one_or_none()
    if role_row is None:
        raise NotFound(f"role {role!r} not found", code="role_not_found")
    membership = (await session.execute(select(Membership).where(
        Membership.user_id == user.id, Membership.organization_id == org.id))).scalar_one_or_none()
    if membership is None:
        membership = Membership(user_id=user.id, organization_id=org.id, role_id=role_row.id)
        session.add(membership)
    else:
        held = await session.get(Role, membership.role_id)
        if held is not None and held.name == "owner" and role != "owner":
            await _keep_an_owner(session, user, org)
        membership.role_id = role_row.id
    await session.flush()
    return membership


async def _keep_an_owner(session: AsyncSession, user: User, org: Organization) -> None:
    """Refuse to take `user`, an owner, out of the owners if they are the last: nobody could manage the
    organization again. Changes of owners in one organization queue, so that two at once cannot both see the other
    still there."""
    await session.execute(select(Organization.id).where(Organization.id == org.id).with_for_update())
    owners = select(func.count()).select_from(Membership).join(Role, Role.id == Membership.role_id).where(
        Membership.organization_id == org.id, Role.name == "owner")
    if (await session.execute(owners)).scalar_one() == 1:
        raise Conflict(f"{user.email} is the last owner of {org.slug}: make someone else owner first",
                       code="last_owner")


async def remove_from_organization(session: AsyncSession, user: User, org: Organization) -> str:
    """End the user's membership; the role they held. An organization keeps at least one owner, or nobody could
    manage it again. Their keys and OAuth consent for it end with it (`_end_credentials`): on every process within
    PRISM_CREDENTIAL_CACHE_SECONDS, and for good, should the user be added back later."""
    row = (await session.execute(select(Membership, Role.name).join(Role, Role.id == Membership.role_id).where(
        Membership.user_id == user.id, Membership.organization_id == org.id))).first()
    if row is None:
        raise NotFound(f"{user.email} is not a member of {org.slug}", code="not_a_member")
    membership, role = row
    if role == "owner":
        await _keep_an_owner(session, user, org)
    await session.delete(membership)
    await _end_credentials(session, user, org)
    await session.flush()
    return str(role)


async def _end_credentials(session: AsyncSession, user: User, org: Organization) -> None:
    """Revoke the user's API keys for `org` and withdraw `org` from their OAuth grants. Without a membership they
    do nothing; left alone they would work again the day the user is added back (any role), keys minted and
    consent given under the old membership, perhaps leaked since. A grant consented for `org` alone is revoked;
    one consented for other organizations too keeps those, and when `org` was its default it has none any more
    (its tokens name an organization with X-Organization-Context, or get 403 session_incomplete) rather than
    silently acting somewhere else."""
    now = utcnow()
    await session.execute(update(ApiKey).where(
        ApiKey.user_id == user.id, ApiKey.organization_id == org.id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=now))
    consented = list((await session.execute(
        select(OAuthGrantOrganization.grant_id).join(OAuthGrant, OAuthGrant.id == OAuthGrantOrganization.grant_id)
        .where(OAuthGrant.user_id == user.id, OAuthGrantOrganization.organization_id == org.id))).scalars())
    if not consented:
        return
    await session.execute(delete(OAuthGrantOrganization).where(
        OAuthGrantOrganization.grant_id.in_(consented), OAuthGrantOrganization.organization_id == org.id))
    await session.execute(update(OAuthGrant).where(OAuthGrant.id.in_(consented), OAuthGrant.organization_id == org.id)
                          .values(organization_id=None))
    still_consented = exists().where(OAuthGrantOrganization.grant_id == OAuthGrant.id)
    await session.execute(update(OAuthGrant).where(
        OAuthGrant.id.in_(consented), OAuthGrant.revoked_at.is_(None), ~still_consented).values(revoked_at=now))


async def set_active(session: AsyncSession, user: User, active: bool) -> None:
    """Deactivating refuses the user everywhere: sign-in, console sessions (ended now), API keys and OAuth tokens
    (within PRISM_CREDENTIAL_CACHE_SECONDS on every process). Nothing of theirs is deleted: activating restores
    what they had."""
    user.is_active = active
    if not active:
        user.sessions_ended_at = utcnow()
    await session.flush()


async def memberships_in_tenant(session: AsyncSession, user: User, tenant_id: str) -> list[Organization]:
    rows = await session.execute(
        select(Organization).join(Membership, Membership.organization_id == Organization.id)
        .where(Membership.user_id == user.id, Organization.tenant_id == tenant_id)
        .order_by(Membership.created_at))
    return list(rows.scalars())


async def members_of_tenant(session: AsyncSession, tenant: Tenant,
                            organization: Organization | None = None) -> list[tuple[User, Organization, str]]:
    """(user, organization, role name) for every membership in the tenant's organizations, or in one of them; by
    organization, then email."""
    stmt = (select(User, Organization, Role.name)
            .join(Membership, Membership.user_id == User.id)
            .join(Organization, Organization.id == Membership.organization_id)
            .join(Role, Role.id == Membership.role_id)
            .where(Organization.tenant_id == tenant.id).order_by(Organization.created_at, User.email))
    if organization is not None:
        stmt = stmt.where(Organization.id == organization.id)
    return [(user, org, role) for user, org, role in (await session.execute(stmt)).all()]
