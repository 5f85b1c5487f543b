"""Build test data through the real services (never by inserting rows behind their back)."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from functools import cache

from sqlalchemy import select

from prism.config import Settings
from prism.identity.service import add_to_organization, create_user, password_hash_of
from prism.keys.service import create_key
from prism.ledger.keys import LedgerKeys
from prism.models import Membership, Organization, Role, Tenant, User
from prism.storage import Database
from prism.tenancy.service import create_organization, create_tenant
from tests.processes import TEST_SECRET_KEY_FILE

_counter = itertools.count()


@cache
def ledger_keys() -> LedgerKeys:
    """The ledger keys of the suite's master secret (every app and process the tests start share it)."""
    return LedgerKeys(Settings(secret_key_file=str(TEST_SECRET_KEY_FILE)))

PASSWORD = "correct horse battery staple"


@cache
def password_hash() -> str:
    """PASSWORD as stored: hashed once for the whole suite (each hash takes about a third of a second)."""
    return password_hash_of(PASSWORD)


def unique(label: str) -> str:
    return f"{label}{os.getpid()}x{next(_counter)}"


@dataclass
class Workspace:
    tenant: Tenant
    org: Organization
    keys: dict[str, str] = field(default_factory=dict)  # role or label -> plaintext key
    emails: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return f"{self.tenant.subdomain}.localhost"

    def headers(self, label: str = "owner", *, host: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[label]}", "Host": host or self.host}


class Factory:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def workspace(self, *, roles: tuple[str, ...] = ("owner", "viewer", "member")) -> Workspace:
        """A tenant with one organization and one user + key per role."""
        async with self.db.write() as s:
            tenant = await create_tenant(s, unique("t"), name="Test tenant")
            org = await create_organization(s, tenant, name="Main org", keys=ledger_keys())
            ws = Workspace(tenant, org)
            for role in roles:
                email = f"{unique(role)}@example.com"
                user = await create_user(s, email, password_hash())
                await add_to_organization(s, user, org, role=role)
                ws.emails[role] = email
                ws.keys[role] = (await create_key(s, tenant=tenant, user=user, organization=org)).plaintext
        return ws

    async def add_key(self, ws: Workspace, label: str, *, role: str = "owner", scopes: str | None = None,
                      expires_days: int | None = None, prefix: str = "ck",
                      org: Organization | None = None, tool_surface: str | None = None) -> str:
        async with self.db.write() as s:
            email = f"{unique(label)}@example.com"
            user = await create_user(s, email, password_hash())
            organization = org or ws.org
            await add_to_organization(s, user, organization, role=role)
            minted = await create_key(s, tenant=ws.tenant, user=user, organization=organization, scopes=scopes,
                                      expires_days=expires_days, prefix=prefix, tool_surface=tool_surface)
        ws.keys[label] = minted.plaintext
        ws.emails[label] = email
        return minted.plaintext

    async def give_role(self, ws: Workspace, label: str, role: str, permissions: list[str]) -> None:
        """Make a tenant role of its own, `role` with `permissions`, and give it to the member `label`."""
        async with self.db.write() as s:
            made = Role(tenant_id=ws.tenant.id, name=role, permissions=permissions)
            s.add(made)
            await s.flush()
            user = (await s.execute(select(User).where(User.email == ws.emails[label]))).scalar_one()
            (await s.execute(select(Membership).where(
                Membership.user_id == user.id, Membership.organization_id == ws.org.id))).scalar_one().role_id = made.id

    async def second_org(self, ws: Workspace, name: str = "Second org") -> Organization:
        async with self.db.write() as s:
            tenant = await s.get(Tenant, ws.tenant.id)
            assert tenant is not None
            return await create_organization(s, tenant, name=name, keys=ledger_keys())
