"""Provisioning tenants and organizations."""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.permissions import BUILTIN_ROLES
from prism.errors import BadRequest, Conflict, NotFound
from prism.kit.ids import stored_organization_id
from prism.ledger.entries import GENESIS_HASH
from prism.ledger.keys import LedgerKeys
from prism.ledger.sealer import empty_head
from prism.models import AuditHead, Organization, Role, Tenant

SUBDOMAIN_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\Z")
RESERVED_SUBDOMAINS = frozenset({"portal", "www", "api", "admin", "auth", "mcp", "static"})
# The width of the name columns: refused here so both engines answer alike (PostgreSQL would refuse the row,
# SQLite would keep it whole).
MAX_NAME_LENGTH = 255


def slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:63] or "org"


async def create_tenant(session: AsyncSession, subdomain: str, *, name: str | None) -> Tenant:
    subdomain = subdomain.strip().lower()
    if not SUBDOMAIN_PATTERN.match(subdomain) or subdomain in RESERVED_SUBDOMAINS:
        raise BadRequest(f"invalid subdomain {subdomain!r}: lowercase letters, digits and '-', "
                         f"not one of {sorted(RESERVED_SUBDOMAINS)}", code="invalid_subdomain")
    if name is not None:
        check_name_length("tenant", name)
    if await get_tenant(session, subdomain) is not None:
        raise Conflict(f"tenant {subdomain!r} already exists", code="tenant_exists")
    tenant = Tenant(subdomain=subdomain, name=name)
    session.add(tenant)
    await session.flush()
    for role_name, patterns in BUILTIN_ROLES.items():
        session.add(Role(tenant_id=tenant.id, name=role_name, permissions=list(patterns), is_builtin=True))
    await session.flush()
    return tenant


def check_name_length(kind: str, name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise BadRequest(f"{kind} name is {len(name)} characters long; at most {MAX_NAME_LENGTH}",
                         code="invalid_name")


async def get_tenant(session: AsyncSession, subdomain: str) -> Tenant | None:
    return (await session.execute(select(Tenant).where(Tenant.subdomain == subdomain))).scalar_one_or_none()


async def list_tenants(session: AsyncSession) -> list[Tenant]:
    return list((await session.execute(select(Tenant).order_by(Tenant.subdomain))).scalars())


async def require_tenant(session: AsyncSession, subdomain: str) -> Tenant:
    tenant = await get_tenant(session, subdomain.strip().lower())
    if tenant is None:
        raise NotFound(f"tenant {subdomain!r} not found", code="tenant_not_found")
    return tenant


async def create_organization(session: AsyncSession, tenant: Tenant, *, name: str, keys: LedgerKeys,
                              slug: str | None = None) -> Organization:
    if not name.strip():
        raise BadRequest("organization name is required", code="invalid_name")
    check_name_length("organization", name.strip())
    slug = slugify(slug or name)
    exists = await session.execute(select(Organization.id).where(
        Organization.tenant_id == tenant.id, Organization.slug == slug))
    if exists.first() is not None:
        raise Conflict(f"organization {slug!r} already exists in tenant {tenant.subdomain!r}",
                       code="organization_exists")
    org = Organization(tenant_id=tenant.id, name=name.strip(), slug=slug)
    session.add(org)
    await session.flush()
    # Every organization's log starts empty and signed: a log deleted later cannot pass for one never written.
    session.add(AuditHead(organization_id=org.id, seq=0, hash=GENESIS_HASH, **empty_head(keys, org.id)))
    await session.flush()
    return org


async def find_organization(session: AsyncSession, tenant: Tenant, ref: str) -> Organization:
    """By id (`org_<hex>` or the UUID) or slug, within the tenant only."""
    stored = stored_organization_id(ref)
    # The id first: a slug may be spelled like another organization's id, and the id is what names one for sure.
    row = None if stored is None else (await session.execute(select(Organization).where(
        Organization.tenant_id == tenant.id, Organization.id == stored))).scalar_one_or_none()
    if row is None:
        row = (await session.execute(select(Organization).where(
            Organization.tenant_id == tenant.id, Organization.slug == ref))).scalar_one_or_none()
    if row is None:
        raise NotFound(f"organization {ref!r} not found in tenant {tenant.subdomain!r}",
                       code="organization_not_found")
    return row


async def list_organizations(session: AsyncSession, tenant: Tenant) -> list[Organization]:
    rows = await session.execute(
        select(Organization).where(Organization.tenant_id == tenant.id).order_by(Organization.created_at))
    return list(rows.scalars())
