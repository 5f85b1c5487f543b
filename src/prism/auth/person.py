"""A person acting in one of their organizations, as the dispatcher sees them (not a key or a token).

The console and the key dashboard act for a signed-in browser session (credential `console`); key registration
for an email and password checked for that one request (credential `password`). Either way the person has their
role's permissions in the organization and all three scopes: the role decides, as it does for the person's keys.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

from sqlalchemy import Row, Select, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import PermissionSet
from prism.errors import NotFound
from prism.models import Membership, Organization, Role, Tenant, User
from prism.registry.mega_tools import PLATFORM_SCOPES

# A membership as `memberships` reads it: organization id and name, role name and patterns, tenant id,
# subdomain and name.
MembershipRow: TypeAlias = "Row[str, str, str, list[str], str, str, str | None]"


def memberships(user: User) -> Select[str, str, str, list[str], str, str, str | None]:
    """The person's memberships with what a caller needs of each (organization, role, tenant), earliest first;
    callers narrow it to a tenant or an organization."""
    return (select(Organization.id, Organization.name, Role.name.label("role"), Role.permissions,
                   Tenant.id.label("tenant_id"), Tenant.subdomain, Tenant.name.label("tenant_name"))
            .join(Membership, Membership.organization_id == Organization.id)
            .join(Role, Role.id == Membership.role_id)
            .join(Tenant, Tenant.id == Organization.tenant_id)
            .where(Membership.user_id == user.id)
            .order_by(Membership.created_at, Organization.id))


async def membership_in(session: AsyncSession, user: User, organization_id: str) -> MembershipRow:
    """The person's membership in one organization; 404 when they are not (or no longer) a member there."""
    row = (await session.execute(memberships(user).where(Organization.id == organization_id))).one_or_none()
    if row is None:
        raise NotFound("organization not found among your organizations", code="organization_not_found")
    return row


def person_context(user: User, membership: MembershipRow, *, credential_kind: str, credential_id: str, key_name: str,
                   signed_in_at: datetime) -> AuthContext:
    """A person acting in one of their organizations with their role there and all three scopes (the role
    decides): a signed-in browser session (`console`) or an email and password checked for this request
    (`password`, key registration)."""
    return AuthContext(
        tenant_id=membership.tenant_id, tenant_subdomain=membership.subdomain, tenant_name=membership.tenant_name,
        organization_id=membership.id, organization_name=membership.name, user_id=user.id, user_email=user.email,
        role=membership.role, permissions=PermissionSet(tuple(membership.permissions)),
        scopes=frozenset(PLATFORM_SCOPES), credential_kind=credential_kind, credential_id=credential_id,
        key_prefix=credential_kind, key_name=key_name, key_created_at=signed_in_at, usage=KeyUsage(None))
