"""The session of a dispatched call acts for the caller's organization, and every ORM statement it runs is
limited to that organization — whatever the handler wrote. A handler that filters nothing still sees, counts
and changes only its caller's rows; reading across organizations takes the named opt-out."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, aliased

from prism.apps.finance.models import Invoice, Vendor
from prism.apps.spare_parts.models import SparePart
from prism.config import Settings
from prism.models import Base
from prism.registry import HandlerApp, HandlerCall
from prism.storage import Database
from prism.tenancy.repository import OrgRepository, to_record
from prism.tenancy.scope import OrgScoped, across_organizations, acting_for, acting_organization
from tests.apps_support import running_app_with
from tests.factories import Factory, Workspace

careless = HandlerApp("careless", description="Handlers that forget to filter by organization.")


class Nothing(BaseModel):
    pass


@careless.handler("report_query", "everything", "peek", params=Nothing, scope="read", permission=None,
                  description="Reads spare parts and invoices without any organization filter.")
async def peek(call: HandlerCall, _: Nothing) -> dict[str, Any]:
    s = call.session
    other = aliased(SparePart)
    subquery = select(SparePart).subquery()
    return {
        "skus": sorted((await s.execute(select(SparePart.sku))).scalars()),
        "count": (await s.execute(select(func.count()).select_from(SparePart))).scalar_one(),
        "count_of_subquery": (await s.execute(select(func.count()).select_from(subquery))).scalar_one(),
        "aliased": sorted((await s.execute(select(other.sku))).scalars()),
        "joined": sorted(list(row) for row in await s.execute(select(Invoice.number, Vendor.name).join(
            Vendor, Invoice.vendor_id == Vendor.id))),
        "vendors_of_invoices": sorted((await s.execute(select(Vendor.name).where(Vendor.id.in_(
            select(Invoice.vendor_id))))).scalars()),
    }


@careless.handler("report_query", "everything", "peekAcross", params=Nothing, scope="read", permission=None,
                  description="Counts spare parts of every organization, through the named opt-out.")
async def peek_across(call: HandlerCall, _: Nothing) -> dict[str, Any]:
    stmt = across_organizations(select(func.count()).select_from(SparePart))
    return {"count": (await call.session.execute(stmt)).scalar_one()}


@careless.handler("entity_crud", "everything", "wipe", params=Nothing, scope="write", permission=None,
                  description="Zeroes every spare part's stock and deletes every vendor without invoices.")
async def wipe(call: HandlerCall, _: Nothing) -> dict[str, Any]:
    s = call.session
    await s.execute(update(SparePart).values(quantity=0))
    await s.execute(delete(Vendor).where(~Vendor.id.in_(select(Invoice.vendor_id))))
    return {}


@careless.handler("report_query", "everything", "actingFor", params=Nothing, scope="read", permission=None,
                  description="Which organization the handler's session acts for.")
async def acting_for_whom(call: HandlerCall, _: Nothing) -> dict[str, Any]:
    return {"organization_id": acting_organization(call.session)}


@pytest.fixture(scope="module")
async def careless_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with running_app_with(settings, careless) as application, httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://localhost") as client:
        yield client


async def call(client: httpx.AsyncClient, ws: Workspace, mega_tool: str, entity: str, operation: str,
               arguments: dict[str, Any], app: str = "careless") -> Any:
    r = await client.post(f"/prism/{mega_tool}/{app}/{entity}/{operation}", headers=ws.headers(), json=arguments)
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def stock(client: httpx.AsyncClient, ws: Workspace, label: str) -> None:
    """Two parts, a vendor with an invoice and one without — the same names in every organization."""
    for sku in ("SKU-1", "SKU-2"):
        await call(client, ws, "entity_crud", "spare_part", "create",
                   {"sku": sku, "name": f"{label} {sku}", "quantity": 7}, app="spare_parts")
    vendor = await call(client, ws, "entity_crud", "vendor", "create", {"name": f"{label} vendor"}, app="finance")
    await call(client, ws, "entity_crud", "vendor", "create", {"name": f"{label} idle vendor"}, app="finance")
    await call(client, ws, "entity_crud", "invoice", "create", {
        "vendor_id": vendor["id"], "number": "INV-1", "amount_cents": 100, "issue_date": "2024-01-01",
        "due_date": "2024-02-01"}, app="finance")


async def rows_of(db: Database, ws: Workspace) -> dict[str, Any]:
    async with db.read() as s:
        parts = (await s.execute(select(SparePart.sku, SparePart.quantity).where(
            SparePart.organization_id == ws.org.id).order_by(SparePart.sku))).all()
        vendors = (await s.execute(select(Vendor.name).where(Vendor.organization_id == ws.org.id)
                                   .order_by(Vendor.name))).scalars().all()
    return {"parts": [tuple(p) for p in parts], "vendors": list(vendors)}


async def test_a_handler_that_filters_nothing_sees_only_its_callers_organization(
        careless_client: httpx.AsyncClient, factory: Factory) -> None:
    mine, theirs = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await stock(careless_client, mine, "mine")
    await stock(careless_client, theirs, "theirs")
    seen = await call(careless_client, mine, "report_query", "everything", "peek", {})
    assert seen == {
        "skus": ["SKU-1", "SKU-2"], "count": 2, "count_of_subquery": 2, "aliased": ["SKU-1", "SKU-2"],
        "joined": [["INV-1", "mine vendor"]], "vendors_of_invoices": ["mine vendor"]}
    across = await call(careless_client, mine, "report_query", "everything", "peekAcross", {})
    assert across["count"] >= 4  # the opt-out sees both organizations' parts (and any other test's)


async def test_every_door_runs_a_handler_in_a_session_acting_for_the_callers_organization(
        careless_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    envelope = {"app": "careless", "entity": "everything", "operation": "actingFor", "arguments": {}}
    canonical = await careless_client.post("/api/mcp/tools/prism_report_query/", headers=ws.headers(),
                                           json=envelope)
    by_path = await careless_client.post("/prism/report_query/careless/everything/actingFor", headers=ws.headers(),
                                         json={})
    sandbox = await careless_client.post("/api/v1/dev/call/", headers=ws.headers(),
                                         json={"name": "prism_report_query", "arguments": envelope})
    assert canonical.json()["data"] == by_path.json()["data"] == sandbox.json() == {"organization_id": ws.org.id}


async def test_a_handler_that_filters_nothing_changes_only_its_callers_organization(
        careless_client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    mine, theirs = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await stock(careless_client, mine, "mine")
    await stock(careless_client, theirs, "theirs")
    before = await rows_of(db, theirs)
    await call(careless_client, mine, "entity_crud", "everything", "wipe", {})
    assert await rows_of(db, mine) == {"parts": [("SKU-1", 0), ("SKU-2", 0)], "vendors": ["mine vendor"]}
    assert await rows_of(db, theirs) == before


def test_every_model_with_an_organization_column_is_marked_org_scoped(app: Any) -> None:
    mappers = list(Base.registry.mappers)
    assert any(m.class_ is SparePart for m in mappers)  # the built-in apps' models are loaded
    unmarked = [m.class_.__name__ for m in mappers
                if "organization_id" in m.columns and not issubclass(m.class_, OrgScoped)]
    assert unmarked == []
    assert all("organization_id" in m.columns for m in mappers if issubclass(m.class_, OrgScoped))


def test_acting_for_gives_the_previous_organization_back() -> None:
    session = Session()
    assert acting_organization(session) is None
    with acting_for(session, "org-a"):
        with acting_for(session, "org-b"):
            assert acting_organization(session) == "org-b"
        assert acting_organization(session) == "org-a"
        with pytest.raises(ValueError), acting_for(session, "org-c"):
            raise ValueError
        assert acting_organization(session) == "org-a"
    assert acting_organization(session) is None


async def test_a_session_acting_for_no_organization_is_not_limited(factory: Factory, db: Database) -> None:
    """Platform code (the ledger, workers, the CLI) acts for no organization; nothing is added to its reads."""
    first, second = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with db.write() as s:
        for ws in (first, second):
            s.add(SparePart(organization_id=ws.org.id, sku="PLATFORM", name="p"))
    orgs = (first.org.id, second.org.id)
    async with db.read() as s:
        everyone = (await s.execute(select(SparePart.organization_id).where(
            SparePart.sku == "PLATFORM", SparePart.organization_id.in_(orgs)))).scalars().all()
        assert sorted(everyone) == sorted(orgs)
        with acting_for(s, first.org.id):
            seen = (await s.execute(select(SparePart.organization_id).where(
                SparePart.sku == "PLATFORM", SparePart.organization_id.in_(orgs)))).scalars().all()
            assert seen == [first.org.id]


async def test_a_repository_of_another_organization_is_refused_in_an_acting_session(
        factory: Factory, db: Database) -> None:
    first, second = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with db.read() as s:
        with acting_for(s, first.org.id), pytest.raises(RuntimeError, match="acting for"):
            OrgRepository(s, SparePart, second.org.id).base()


async def test_a_record_read_by_id_shows_what_the_orm_row_shows(factory: Factory, db: Database) -> None:
    """Dates and datetimes as ISO text, the organization column left out, on the acting path and off it."""
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as s:
        vendor = Vendor(organization_id=ws.org.id, name="Dated vendor")
        s.add(vendor)
        await s.flush()
        invoice = Invoice(organization_id=ws.org.id, vendor_id=vendor.id, number="D-1", amount_cents=5,
                          issue_date=date(2024, 3, 1), due_date=date(2024, 4, 1))
        s.add(invoice)
    async with db.read() as s:
        row = (await s.execute(select(Invoice).where(Invoice.id == invoice.id))).scalar_one()
        expected = to_record(row)
        assert expected["issue_date"] == "2024-03-01" and isinstance(expected["created_at"], str)
        assert "organization_id" not in expected
        repository = OrgRepository(s, Invoice, ws.org.id)
        assert await repository.get_record(invoice.id) == expected
        with acting_for(s, ws.org.id):
            assert await repository.get_record(invoice.id) == expected


async def test_a_page_shows_each_record_as_the_orm_row_shows_it(factory: Factory, db: Database) -> None:
    """A page reads the shown columns, not ORM objects: each item is still what `to_record` makes of the row, on the
    acting path and off it, and only the repository's organization's rows are on it."""
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with db.write() as s:
        for org, name in ((ws.org.id, "Paged vendor"), (other.org.id, "Other vendor")):
            vendor = Vendor(organization_id=org, name=name)
            s.add(vendor)
            await s.flush()
            s.add(Invoice(organization_id=org, vendor_id=vendor.id, number=f"P-{name[0]}", amount_cents=7,
                          issue_date=date(2024, 3, 1), due_date=date(2024, 4, 1)))
    async with db.read() as s:
        rows = (await s.execute(select(Invoice).where(Invoice.organization_id == ws.org.id))).scalars()
        expected = sorted((to_record(row) for row in rows), key=lambda r: r["id"])
        assert expected and expected[0]["issue_date"] == "2024-03-01"
        repository = OrgRepository(s, Invoice, ws.org.id)
        for acting in (False, True):
            with acting_for(s, ws.org.id) if acting else contextlib.nullcontext():
                page = await repository.page(repository.base(), page=1, page_size=100, ordering="id",
                                             orderable=("id",), default_ordering="id")
            assert page["items"] == expected and page["total"] == len(expected), acting
