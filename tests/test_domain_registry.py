"""The business domain as a whole: enough real handlers, each fully declared, and none of them reads or
changes another organization's records (every id-taking handler answers 404 for a neighbour's ids)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import select

from prism.registry import Handler, Registry
from prism.registry.registry import build_registry
from tests.domain_support import Caller
from tests.factories import Factory

DOMAIN_MODULES = {
    "prism.apps.crud", "prism.apps.finance.payments", "prism.apps.finance.orders", "prism.apps.spare_parts.stock",
    "prism.apps.claims.handlers",
    "prism.apps.maintenance.handlers", "prism.apps.itsm.handlers", "prism.apps.documents.handlers",
    "prism.apps.agents.handlers", "prism.apps.notifications.handlers", "prism.apps.integrations.handlers",
}
DOMAIN_APPS = {"finance", "spare_parts", "claims", "maintenance", "itsm", "documents", "agents", "notifications",
               "integrations"}


def _domain(registry: Registry) -> list[Handler]:
    return [h for h in registry if h.func.__module__ in DOMAIN_MODULES and h.coordinate.app in DOMAIN_APPS]


def test_the_registry_holds_at_least_300_handlers_across_the_mega_tools() -> None:
    registry = build_registry()
    assert len(registry) >= 300
    used = {h.coordinate.mega_tool for h in _domain(registry)}
    assert {"entity_crud", "workflow_action", "report_query", "smart_action", "agent_command", "integration_call",
            "document_op", "knowledge_query", "notification_send"} <= used


def test_every_domain_handler_is_fully_declared() -> None:
    registry = build_registry()
    handlers = _domain(registry)
    assert len(handlers) > 250
    entities = {(h.coordinate.app, h.coordinate.entity) for h in registry}
    for h in handlers:
        assert len(h.description) > 15 and h.category == h.coordinate.app, h.path
        assert h.permission is not None, h.path
        app, _, rest = h.permission.partition(".")
        verb, _, model = rest.partition("_")
        assert app == h.coordinate.app and verb in ("view", "add", "change", "delete"), h.path
        assert (app, model) in entities, (h.path, h.permission)
        assert h.read_only == (h.scope == "read") and not (h.read_only and h.destructive), h.path
        for name, field in h.schema["properties"].items():
            assert field.get("description"), f"{h.path}: parameter {name} has no description"


# --- organization isolation, swept over every id-taking domain handler ----------------------------------------


def _sample(schema: dict[str, Any]) -> Any:
    """A valid value for a required parameter, so that the call reaches its record lookup."""
    if "anyOf" in schema:
        return _sample(next(s for s in schema["anyOf"] if s.get("type") != "null"))
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer":
        return max(schema.get("minimum", 1), schema.get("exclusiveMinimum", 0) + 1)
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return False
    if kind == "array":
        return [_sample(schema.get("items", {"type": "string"}))]
    if kind == "object":
        return {}
    if schema.get("format") == "date":
        return "2024-01-01"
    if schema.get("format") == "date-time":
        return "2024-01-01T00:00:00Z"
    return "sample text"


async def _populate(c: Caller, marker: str) -> dict[str, list[str]]:
    """One record of every domain entity, made through the handlers."""
    ids: dict[str, list[str]] = {}

    async def make(mega: str, app: str, entity: str, op: str, args: dict[str, Any], key: str | None = None) -> Any:
        data = await c.ok(mega, app, entity, op, args)
        record = data.get("movement", data) if isinstance(data, dict) else data
        ids.setdefault(key or entity, []).append(record["id"])
        return record

    vendor = await make("entity_crud", "finance", "vendor", "create", {"name": f"V {marker}"})
    invoice = await make("entity_crud", "finance", "invoice", "create", {
        "vendor_id": vendor["id"], "number": marker, "amount_cents": 500, "issue_date": "2024-01-01",
        "due_date": "2024-01-02"})
    await c.ok("workflow_action", "finance", "invoice", "approve", {"id": invoice["id"]})
    await make("entity_crud", "finance", "payment", "create", {"invoice_id": invoice["id"], "amount_cents": 100,
                                                               "paid_on": "2024-01-03"})
    await make("entity_crud", "finance", "purchase_order", "create", {"vendor_id": vendor["id"], "number": marker,
                                                                      "amount_cents": 100})
    part = await make("entity_crud", "spare_parts", "spare_part", "create", {"sku": marker, "name": marker,
                                                                             "quantity": 10})
    await make("workflow_action", "spare_parts", "spare_part", "receiveStock", {"id": part["id"], "quantity": 1},
               key="stock_movement")
    payer = await make("entity_crud", "claims", "payer", "create", {"code": marker, "name": marker})
    patient = await make("entity_crud", "claims", "patient", "create", {"member_id": marker, "name": marker})
    claim = await make("entity_crud", "claims", "claim", "create", {
        "number": marker, "payer_id": payer["id"], "patient_id": patient["id"], "service_date": "2024-01-01"})
    await make("entity_crud", "claims", "claim_line", "create", {"claim_id": claim["id"], "procedure_code": "P",
                                                                 "unit_price_cents": 10})
    asset = await make("entity_crud", "maintenance", "asset", "create", {"tag": marker, "name": marker})
    order = await make("entity_crud", "maintenance", "work_order", "create", {"asset_id": asset["id"],
                                                                              "title": marker})
    await make("entity_crud", "maintenance", "work_order_part", "create", {
        "work_order_id": order["id"], "spare_part_id": part["id"], "quantity": 1})
    await make("entity_crud", "maintenance", "plan", "create", {"asset_id": asset["id"], "title": marker,
                                                                "interval_days": 7, "next_due": "2030-01-01"})
    await make("entity_crud", "maintenance", "meter_reading", "create", {
        "asset_id": asset["id"], "meter": "hours", "value": 5, "read_at": "2024-01-01T00:00:00Z"})
    service = await make("entity_crud", "itsm", "service", "create", {"name": marker})
    await make("entity_crud", "itsm", "sla_policy", "create", {"priority": "p3", "resolve_hours": 8})
    ticket = await make("entity_crud", "itsm", "ticket", "create", {"title": marker, "service_id": service["id"]})
    await make("entity_crud", "itsm", "ticket_comment", "create", {"ticket_id": ticket["id"], "body": marker})
    collection = await make("entity_crud", "documents", "collection", "create", {"name": marker})
    document = await make("document_op", "documents", "document", "upload", {
        "title": marker, "content": f"Knowledge about {marker} and valves.", "collection_id": collection["id"]})
    chunks = await c.ok("entity_crud", "documents", "chunk", "list", {"document_id": document["id"]})
    ids["chunk"] = [x["id"] for x in chunks["items"]]
    agent = await make("entity_crud", "agents", "agent", "create", {"name": marker})
    instance = await make("agent_command", "agents", "agent_instance", "spawn", {"agent_id": agent["id"],
                                                                                  "task": marker})
    await c.ok("agent_command", "agents", "agent_instance", "run", {"id": instance["id"]})
    await make("agent_command", "agents", "agent_instance", "recordStep", {"id": instance["id"], "kind": "thought",
                                                                           "content": marker}, key="agent_step")
    channel = await make("entity_crud", "notifications", "channel", "create", {"name": marker})
    await make("entity_crud", "notifications", "template", "create", {"name": marker, "subject": "s", "body": "b"})
    await make("notification_send", "notifications", "notification", "send", {"channel_id": channel["id"],
                                                                              "subject": marker})
    endpoint = await make("entity_crud", "integrations", "endpoint", "create", {
        "name": marker, "base_url": "https://93.184.215.14/api", "timeout_seconds": 1})
    # No route to the internet is needed: a failed call is logged all the same.
    ping = await c.ok("integration_call", "integrations", "endpoint", "ping", {"id": endpoint["id"]})
    ids["call_log"] = [ping["call_log_id"]]
    return ids


@pytest.fixture(scope="module")
async def neighbours(app: Any, db: Any) -> tuple[Caller, dict[str, list[str]], str]:
    factory = Factory(db)
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://localhost")
    theirs = Caller(client, await factory.workspace(roles=("owner",)))
    marker = "neighbour-marker-7f3a"
    their_ids = await _populate(theirs, marker)
    mine = Caller(client, await factory.workspace(roles=("owner",)))
    await _populate(mine, "mine-marker-2c9d")
    return mine, their_ids, marker


async def test_every_id_taking_domain_handler_answers_not_found_for_a_neighbours_ids(
        app: Any, neighbours: tuple[Caller, dict[str, list[str]], str]) -> None:
    mine, theirs, _ = neighbours
    registry: Registry = app.state.registry
    swept = 0
    for h in _domain(registry):
        c = h.coordinate
        required = h.schema.get("required", [])
        if "id" not in required and "ids" not in required:
            continue
        assert c.entity in theirs, f"no neighbour record of {c.entity} for {h.path}"
        arguments = {name: _sample(h.schema["properties"][name]) for name in required}
        for their_id in theirs[c.entity]:
            if "ids" in required:
                data = await mine.ok(c.mega_tool, c.app, c.entity, c.operation, {**arguments, "ids": [their_id]})
                assert data == {"items": [], "missing": [their_id]}, h.path
            else:
                await mine.refused(404, "not_found", c.mega_tool, c.app, c.entity, c.operation,
                                   {**arguments, "id": their_id})
            swept += 1
    assert swept > 130


async def test_no_domain_list_count_or_report_mentions_a_neighbours_records(
        app: Any, neighbours: tuple[Caller, dict[str, list[str]], str]) -> None:
    mine, theirs, marker = neighbours
    registry: Registry = app.state.registry
    their_ids = {i for ids in theirs.values() for i in ids}
    checked = 0
    for h in _domain(registry):
        if not h.read_only or h.schema.get("required"):
            continue
        c = h.coordinate
        arguments = {"page_size": 100} if "page_size" in h.schema["properties"] else {}
        data = await mine.ok(c.mega_tool, c.app, c.entity, c.operation, arguments)
        text = orjson.dumps(data).decode()
        assert marker not in text and not any(i in text for i in their_ids), h.path
        if "total" in data:
            assert data["total"] >= 1, h.path  # my own record is there: the sweep would see a leak
        checked += 1
    assert checked > 50
    search = await mine.ok("knowledge_query", "documents", "chunk", "search", {"query": f"{marker} valves"})
    assert all(marker not in r["text"] for r in search["results"]) and search["results"]


def test_permission_names_follow_the_app_verb_model_pattern() -> None:
    pattern = re.compile(r"^[a-z_]+\.(view|add|change|delete)_[a-z_]+$")
    assert all(pattern.match(h.permission or "") for h in _domain(build_registry()))


async def test_the_demo_records_are_real_records_the_handlers_work_on(
        client: httpx.AsyncClient, factory: Factory, db: Any) -> None:
    from prism.apps.demo import seed_domain
    from prism.models import Organization, User

    ws = await factory.workspace(roles=("owner",))
    async with db.write() as session:
        org = await session.get(Organization, ws.org.id)
        user = (await session.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await seed_domain(session, org, user)
    c = Caller(client, ws)
    summary = await c.ok("report_query", "claims", "claim", "byPayer", {})
    assert summary["payers"][0]["claims"] == 4 and summary["payers"][0]["denied"] == 1
    hits = await c.ok("knowledge_query", "documents", "chunk", "search", {"query": "when to replace the seal"})
    assert "8000 operating hours" in hits["results"][0]["text"]
    ticket = await c.create("itsm", "ticket", {"title": "Printer", "priority": "p1"})
    assert ticket["number"] == 3 and ticket["sla_due_at"]
    inbox = await c.ok("report_query", "notifications", "notification", "inbox", {})
    assert inbox["unread"] == 1
    draft = (await c.ok("entity_crud", "claims", "claim", "list", {"status": "draft"}))["items"][0]
    assert (await c.ok("workflow_action", "claims", "claim", "submit", {"id": draft["id"]}))["status"] == "submitted"


async def test_a_second_organization_of_the_same_tenant_is_as_foreign_as_another_tenant(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    side_org = await factory.second_org(ws, name="Side org")
    await factory.add_key(ws, "side", org=side_org)
    mine, side = Caller(client, ws), Caller(client, ws, "side")
    their = await _populate(side, "side-org-marker-41b")
    for app_name, entity, record_ids in (("claims", "claim", their["claim"]), ("itsm", "ticket", their["ticket"]),
                                         ("documents", "document", their["document"]),
                                         ("agents", "agent_instance", their["agent_instance"]),
                                         ("finance", "payment", their["payment"])):
        await mine.refused(404, "not_found", "entity_crud", app_name, entity, "read", {"id": record_ids[0]})
    await mine.refused(404, "not_found", "workflow_action", "itsm", "ticket", "resolve",
                       {"id": their["ticket"][0], "resolution": "x"})
    found = await mine.ok("knowledge_query", "documents", "chunk", "search", {"query": "side-org-marker-41b valves"})
    assert found["results"] == []
    assert (await side.ok("knowledge_query", "documents", "chunk", "search",
                          {"query": "side-org-marker-41b"}))["results"]
