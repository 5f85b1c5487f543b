"""The demo workspace seeded by the first `prism serve` on an empty database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.demo import seed_domain
from prism.apps.finance.models import Invoice, Vendor
from prism.apps.spare_parts.models import SparePart
from prism.identity.service import add_to_organization, create_user, get_user, password_hash_of
from prism.keys.service import create_key
from prism.kit.ids import random_token
from prism.ledger.keys import LedgerKeys
from prism.models import Tenant
from prism.tenancy.service import create_organization, create_tenant

DEMO_SUBDOMAIN = "demo"
DEMO_ADMIN_EMAIL = "admin@demo.example.com"

SPARE_PARTS = [
    ("BRG-6204", "Ball bearing 6204-2RS", 140, 40, 385, "Aisle 3 / Bin 12"),
    ("BLT-A42", "V-belt A42", 12, 20, 1290, "Aisle 1 / Bin 4"),
    ("FLT-HY10", "Hydraulic filter 10 micron", 35, 10, 4250, "Aisle 5 / Bin 2"),
    ("SEL-2535", "Oil seal 25x35x7", 260, 50, 95, "Aisle 3 / Bin 14"),
    ("MTR-0075", "Motor 0.75 kW IE3", 2, 3, 31900, "Cage B"),
    ("FUS-10A", "Fuse 10 A gG", 500, 100, 60, "Electrical cabinet"),
]
VENDORS = [("Nordic Bearings AB", "ap@nordicbearings.example", 30),
           ("Hydra Supply Co", "billing@hydrasupply.example", 45),
           ("Volt Electric Ltd", "invoices@voltelectric.example", 30)]
# (vendor index, number, amount in cents, days since issue, payment terms, status)
INVOICES = [(0, "NB-1001", 185_000, 10, 30, "received"), (0, "NB-0987", 92_500, 50, 30, "approved"),
            (1, "HS-5521", 412_000, 75, 45, "received"), (1, "HS-5480", 38_900, 140, 45, "disputed"),
            (2, "VE-220", 64_000, 20, 30, "paid"), (2, "VE-231", 129_900, 100, 30, "approved")]


@dataclass(frozen=True)
class DemoWorkspace:
    tenant: Tenant
    admin_email: str
    admin_password: str | None
    api_key: str


async def is_empty(session: AsyncSession) -> bool:
    return (await session.execute(select(func.count()).select_from(Tenant))).scalar_one() == 0


async def seed_demo(session: AsyncSession, keys: LedgerKeys) -> DemoWorkspace:
    tenant = await create_tenant(session, DEMO_SUBDOMAIN, name="Demo Workspace")
    org = await create_organization(session, tenant, name="Demo Operations", slug="demo-ops", keys=keys)
    password: str | None = None
    user = await get_user(session, DEMO_ADMIN_EMAIL)
    if user is None:
        password = random_token(20)
        user = await create_user(session, DEMO_ADMIN_EMAIL, password_hash_of(password))
    await add_to_organization(session, user, org, role="owner")
    for sku, name, qty, reorder, cost, location in SPARE_PARTS:
        session.add(SparePart(organization_id=org.id, sku=sku, name=name, quantity=qty, reorder_level=reorder,
                              unit_cost_cents=cost, location=location))
    vendors = []
    for name, email, terms in VENDORS:
        vendor = Vendor(organization_id=org.id, name=name, email=email, payment_terms_days=terms)
        session.add(vendor)
        vendors.append(vendor)
    await session.flush()
    today = datetime.now(UTC).date()
    for vendor_index, number, amount, age, terms, status in INVOICES:
        issued = today - timedelta(days=age)
        session.add(Invoice(organization_id=org.id, vendor_id=vendors[vendor_index].id, number=number,
                            amount_cents=amount, issue_date=issued, due_date=issued + timedelta(days=terms),
                            status=status))
    await seed_domain(session, org, user)
    minted = await create_key(session, tenant=tenant, user=user, organization=org, name="Demo key")
    await session.flush()
    return DemoWorkspace(tenant, DEMO_ADMIN_EMAIL, password, minted.plaintext)
