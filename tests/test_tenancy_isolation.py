"""Organization isolation: a key of organization A never reads, lists, counts or changes another
organization's records — neither a second organization of the same tenant nor another tenant's — on any
door. Another organization's id is simply not found (404), never forbidden (403)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import func, select

from prism.apps import BUILTIN_APP_MODULES
from prism.apps.finance.models import Invoice, Vendor
from prism.apps.spare_parts.models import SparePart
from prism.errors import NotFound
from prism.models import ApiKey, AuditEntry
from prism.registry import Handler, Registry
from prism.storage import Database
from prism.tenancy.repository import OrgRepository
from tests.factories import Factory, ledger_keys

DOORS = ("canonical", "prism_path", "sandbox")
NEIGHBOURS = ("same_tenant", "other_tenant")
MODELS: dict[str, Any] = {"spare_part": SparePart, "vendor": Vendor, "invoice": Invoice}
APP_OF = {"spare_part": "spare_parts", "vendor": "finance", "invoice": "finance"}
# Entities whose list is the same for everyone (not organization data).
GLOBAL_ENTITIES = {("core", "webhook_event")}


@dataclass
class Org:
    """One organization as its own key sees it, with the records it created."""

    headers: dict[str, str]
    organization_id: str
    marker: str
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def ids(self, entity: str) -> list[str]:
        return [r["id"] for r in self.records[entity]]


@dataclass
class World:
    mine: Org
    neighbours: dict[str, Org]


async def via(client: httpx.AsyncClient, door: str, headers: dict[str, str], app: str, entity: str, operation: str,
              arguments: dict[str, Any], mega_tool: str = "entity_crud") -> tuple[int, Any]:
    """(status, data) on success, (status, error code) on failure — whatever the door's own shape."""
    envelope = {"app": app, "entity": entity, "operation": operation, "arguments": arguments}
    if door == "canonical":
        r = await client.post(f"/api/mcp/tools/prism_{mega_tool}/", headers=headers, json=envelope)
    elif door == "prism_path":
        r = await client.post(f"/prism/{mega_tool}/{app}/{entity}/{operation}", headers=headers, json=arguments)
    else:
        r = await client.post("/api/v1/dev/call/", headers=headers, json={"name": f"prism_{mega_tool}",
                                                                          "arguments": envelope})
    body = r.json()
    if door == "sandbox":
        return r.status_code, body if r.is_success else body["error"]
    return r.status_code, body["data"] if r.is_success else body["error"]


async def populate(client: httpx.AsyncClient, headers: dict[str, str], organization_id: str, label: str) -> Org:
    marker = f"{label}-{uuid.uuid4().hex[:8]}"
    org = Org(headers, organization_id, marker)

    async def create(entity: str, arguments: dict[str, Any]) -> dict[str, Any]:
        status, data = await via(client, "canonical", headers, APP_OF[entity], entity, "create", arguments)
        assert status == 200, data
        org.records.setdefault(entity, []).append(data)
        return data  # type: ignore[no-any-return]

    # The same sku and invoice number in every organization: uniqueness is per organization.
    await create("spare_part", {"sku": "SHARED-1", "name": f"Pump {marker}", "quantity": 1, "reorder_level": 5,
                                "location": "Dock"})
    await create("spare_part", {"sku": f"OWN-{marker}", "name": f"Filter {marker}", "quantity": 9})
    vendor = await create("vendor", {"name": f"Vendor {marker}"})
    await create("invoice", {"vendor_id": vendor["id"], "number": "INV-1", "amount_cents": 1_000,
                             "issue_date": "2024-01-01", "due_date": "2024-02-01", "memo": marker})
    return org


@pytest.fixture(scope="module")
async def world(app: Any, db: Database) -> World:
    factory = Factory(db)
    a = await factory.workspace(roles=("owner",))
    side = await factory.second_org(a, name="Side org")
    await factory.add_key(a, "side", org=side)
    b = await factory.workspace(roles=("owner",))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        return World(
            mine=await populate(client, a.headers(), a.org.id, "mine"),
            neighbours={
                "same_tenant": await populate(client, a.headers("side"), side.id, "side"),
                "other_tenant": await populate(client, b.headers(), b.org.id, "other"),
            },
        )


async def snapshot(db: Database, org: Org) -> dict[str, Any]:
    """Every stored column of the organization's records, and the length of its audit chain."""
    out: dict[str, Any] = {}
    async with db.read() as s:
        for entity, model in MODELS.items():
            rows = (await s.execute(select(model).where(model.organization_id == org.organization_id)
                                    .order_by(model.id))).scalars()
            out[entity] = [{c.key: getattr(r, c.key) for c in model.__table__.columns} for r in rows]
        out["ledger"] = (await s.execute(select(func.count()).select_from(AuditEntry).where(
            AuditEntry.organization_id == org.organization_id))).scalar_one()
    return out


# Apps whose records `populate` does not create through handlers: their ids are read from the database.
STORED_IDS: dict[str, Any] = {"ledger": AuditEntry, "keys": ApiKey}


async def stored_ids(db: Database, org: Org, app: str) -> list[Any]:
    """Ids of the organization's ledger entries (its calls in `populate`, as its own API names them) or API keys."""
    model = STORED_IDS[app]
    async with db.read() as s:
        ids = list((await s.execute(select(model.id).where(model.organization_id == org.organization_id))).scalars())
    assert ids
    if model is AuditEntry:
        return [ledger_keys().entry_ref(org.organization_id, entry_id) for entry_id in ids]
    return ids


def mentions(data: Any, org: Org) -> bool:
    text = orjson.dumps(data).decode()
    return org.marker in text or any(i in text for ids in org.records.values() for i in (r["id"] for r in ids))


# --- lists, reads and writes on every door ---------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("neighbour", NEIGHBOURS)
async def test_lists_hold_and_count_only_the_callers_records(
        client: httpx.AsyncClient, world: World, db: Database, neighbour: str, door: str) -> None:
    mine, theirs = world.mine, world.neighbours[neighbour]
    before = await snapshot(db, theirs)
    for entity in MODELS:
        for arguments in ({}, {"page_size": 100}, {"search": theirs.marker}, {"search": "SHARED"}):
            status, data = await via(client, door, mine.headers, APP_OF[entity], entity, "list", arguments)
            assert status == 200, data
            ids = [item["id"] for item in data["items"]]
            assert data["total"] == len(ids)
            assert not set(ids) & set(theirs.ids(entity)), (entity, arguments)
            assert set(ids) <= set(mine.ids(entity))
            if not arguments or "page_size" in arguments:
                assert sorted(ids) == sorted(mine.ids(entity)) and data["total"] == len(mine.ids(entity))
            assert not mentions(data, theirs)
    status, data = await via(client, door, mine.headers, "spare_parts", "spare_part", "list",
                             {"location": "Dock", "below_reorder_level": True})
    assert status == 200 and data["total"] == 1 and data["items"][0]["id"] == mine.ids("spare_part")[0]
    their_vendor = theirs.ids("vendor")[0]
    status, data = await via(client, door, mine.headers, "finance", "invoice", "list", {"vendor_id": their_vendor})
    assert status == 200 and data == {"items": [], "page": 1, "page_size": 20, "total": 0}
    assert await snapshot(db, theirs) == before


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("neighbour", NEIGHBOURS)
async def test_another_organizations_ids_are_not_found_and_stay_unchanged(
        client: httpx.AsyncClient, world: World, db: Database, neighbour: str, door: str) -> None:
    mine, theirs = world.mine, world.neighbours[neighbour]
    before = await snapshot(db, theirs)
    mine_before = (await snapshot(db, mine))["ledger"]
    attempts = 0
    changes: dict[str, dict[str, Any]] = {"spare_part": {"quantity": 0, "name": "stolen"},
                                          "invoice": {"status": "approved", "memo": "x"}}
    for entity in MODELS:
        for their_id in theirs.ids(entity):
            operations: list[tuple[str, dict[str, Any]]] = [("read", {"id": their_id})]
            if entity in changes:
                operations.append(("update", {"id": their_id, **changes[entity]}))
            if entity == "spare_part":
                operations.append(("delete", {"id": their_id}))
            for operation, arguments in operations:
                status, code = await via(client, door, mine.headers, APP_OF[entity], entity, operation, arguments)
                assert (status, code) == (404, "not_found"), (entity, operation, status, code)
                attempts += 1
    assert await snapshot(db, theirs) == before  # nothing changed, nothing ledgered in their chain
    assert (await snapshot(db, mine))["ledger"] == mine_before + attempts  # the attempts are in ours
    async with db.read() as s:
        refused = (await s.execute(select(AuditEntry.error_code).where(
            AuditEntry.organization_id == mine.organization_id).order_by(AuditEntry.id.desc())
            .limit(attempts))).scalars().all()
    assert set(refused) == {"not_found"}
    for entity in MODELS:  # and their own key still sees them as they were
        for record in theirs.records[entity]:
            status, data = await via(client, "canonical", theirs.headers, APP_OF[entity], entity, "read",
                                     {"id": record["id"]})
            assert status == 200 and data == record


@pytest.mark.parametrize("neighbour", NEIGHBOURS)
async def test_invoice_cannot_point_at_another_organizations_vendor(
        client: httpx.AsyncClient, world: World, db: Database, neighbour: str) -> None:
    mine, theirs = world.mine, world.neighbours[neighbour]
    for door in DOORS:
        status, code = await via(client, door, mine.headers, "finance", "invoice", "create", {
            "vendor_id": theirs.ids("vendor")[0], "number": f"X-{door}", "amount_cents": 5,
            "issue_date": "2024-01-01", "due_date": "2024-01-02"})
        assert (status, code) == (404, "not_found")
    async with db.read() as s:
        count = (await s.execute(select(func.count()).select_from(Invoice).where(
            Invoice.organization_id.in_((mine.organization_id, theirs.organization_id)),
            Invoice.number.like("X-%")))).scalar_one()
    assert count == 0


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("neighbour", NEIGHBOURS)
async def test_aging_report_counts_only_the_callers_invoices(
        client: httpx.AsyncClient, world: World, neighbour: str, door: str) -> None:
    mine, theirs = world.mine, world.neighbours[neighbour]
    status, report = await via(client, door, mine.headers, "finance", "invoice", "agingApSummary",
                               {"as_of": "2024-03-01"}, mega_tool="report_query")
    assert status == 200, report
    assert report["invoice_count"] == len(mine.ids("invoice")) == 1
    assert report["by_currency"][0]["total"] == 1_000 and report["by_currency"][0]["days_1_30"] == 1_000
    assert [v["vendor_id"] for v in report["by_vendor"]] == mine.ids("vendor")
    assert not mentions(report, theirs)
    status, report = await via(client, door, mine.headers, "finance", "invoice", "agingApSummary",
                               {"as_of": "2024-03-01", "vendor_id": theirs.ids("vendor")[0]}, mega_tool="report_query")
    assert status == 200 and report["invoice_count"] == 0 and report["by_vendor"] == []


async def test_second_organization_key_sees_its_own_records_not_the_first(
        client: httpx.AsyncClient, world: World) -> None:
    side, mine = world.neighbours["same_tenant"], world.mine
    for entity in MODELS:
        status, data = await via(client, "canonical", side.headers, APP_OF[entity], entity, "list", {})
        assert status == 200 and sorted(i["id"] for i in data["items"]) == sorted(side.ids(entity))
        status, code = await via(client, "canonical", side.headers, APP_OF[entity], entity, "read",
                                 {"id": mine.ids(entity)[0]})
        assert (status, code) == (404, "not_found")


async def test_org_repository_filters_the_callers_organization(world: World, db: Database) -> None:
    mine, theirs = world.mine, world.neighbours["other_tenant"]
    async with db.read() as s:
        repo = OrgRepository(s, SparePart, mine.organization_id, label="spare_part")
        assert (await repo.get(mine.ids("spare_part")[0])).id == mine.ids("spare_part")[0]
        with pytest.raises(NotFound):
            await repo.get(theirs.ids("spare_part")[0])
        with pytest.raises(NotFound):
            await repo.get_record(theirs.ids("spare_part")[0])
        rows = (await s.execute(repo.base())).scalars().all()
        assert sorted(r.id for r in rows) == sorted(mine.ids("spare_part"))
        page = await repo.page(repo.base(), page=1, page_size=100, ordering=None, orderable=("name",),
                               default_ordering="name")
        assert page["total"] == 2 and "organization_id" not in page["items"][0]


# --- every handler, present and future ----------------------------------------------------------------
# Handlers are not inspected for a filter: the session they run in limits every statement to the caller's
# organization (tests/test_tenancy_scope.py shows a handler that filters nothing). Here every built-in
# handler is called with the neighbour's ids and must reveal nothing of them.


def _builtin(registry: Registry) -> list[Handler]:
    return [h for h in registry if h.func.__module__ in BUILTIN_APP_MODULES]


@pytest.mark.parametrize("neighbour", NEIGHBOURS)
async def test_no_builtin_handler_reveals_another_organizations_record(
        client: httpx.AsyncClient, world: World, app: Any, neighbour: str) -> None:
    """Every built-in handler, called by A: lists and reports never mention the neighbour's records, and
    every id-taking operation answers not found for each of the neighbour's ids."""
    registry: Registry = app.state.registry
    mine, theirs = world.mine, world.neighbours[neighbour]
    entities = {(h.coordinate.app, h.coordinate.entity) for h in _builtin(registry)
                if h.coordinate.mega_tool == "entity_crud"}
    # A new organization-scoped entity must be added to MODELS (and `populate`) to be covered here.
    assert entities - GLOBAL_ENTITIES == {(APP_OF[e], e) for e in MODELS}
    swept: set[str] = set()
    for handler in _builtin(registry):
        if handler.people_only:  # a key calls none of them (person_required); tests/test_keys_governed_paths.py
            continue             # sweeps another organization's key through the pages a person uses
        c = handler.coordinate
        takes_id = "id" in handler.schema.get("required", [])
        if takes_id:
            their_ids: list[Any] = (await stored_ids(app.state.db, theirs, c.app) if c.app in STORED_IDS
                                    else theirs.ids(c.entity))
            for their_id in their_ids:
                status, code = await via(client, "canonical", mine.headers, c.app, c.entity, c.operation,
                                         {"id": their_id}, mega_tool=c.mega_tool)
                assert (status, code) == (404, "not_found"), (handler.path, status, code)
            swept.add(handler.path)
        elif handler.read_only:
            arguments: dict[str, Any] = {"page_size": 100} if "page_size" in handler.schema["properties"] else {}
            if "query" in handler.schema.get("required", []):  # capability search: a request is required
                arguments["query"] = "which spare parts are low on stock"
            status, data = await via(client, "canonical", mine.headers, c.app, c.entity, c.operation, arguments,
                                     mega_tool=c.mega_tool)
            assert status == 200, (handler.path, data)
            assert not mentions(data, theirs), handler.path
            if (c.app, c.entity) in GLOBAL_ENTITIES:
                status, same = await via(client, "canonical", theirs.headers, c.app, c.entity, c.operation,
                                         arguments, mega_tool=c.mega_tool)
                assert same == data
            swept.add(handler.path)
    unswept = {h.path for h in _builtin(registry) if not h.people_only} - swept
    assert all(h.endswith("/create") for h in unswept), unswept  # creates are covered by populate and above
