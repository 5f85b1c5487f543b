"""Introspection: every dimension on every spelling of the endpoint, its errors, what each key sees,
and how well capability search ranks — on the real app and, for scale, on a 10,000-handler registry."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from pydantic import Field

from prism.apps.params import Params
from prism.auth.context import AuthContext, KeyUsage
from prism.auth.permissions import BUILTIN_ROLES, PermissionSet
from prism.registry import HandlerApp, HandlerCall, Registry
from prism.registry.introspect import IntrospectParams, introspect
from prism.registry.mega_tools import MEGA_TOOLS
from prism.registry.search import index_for, split_words, stem
from prism.storage import Database
from tests.factories import Factory, Workspace

URL = "/api/v1/dev/introspect/"
WRITE_OPERATIONS = {"create", "update", "delete"}

DIMENSIONS: dict[str, dict[str, Any]] = {
    "mega_tools": {},
    "apps": {"mega_tool": "entity_crud"},
    "entities": {"app": "finance"},
    "operations": {"app": "spare_parts", "entity": "spare_part"},
    "schema": {"operation": "agingApSummary"},
    "stats": {},
    "handlers": {"limit": 5, "page": 1},
    "capability_search": {"query": "overdue payables aging", "limit": 3},
    "capability_path": {"from_node": "entity_crud/finance/invoice/list",
                        "to_node": "report_query/finance/invoice/agingApSummary"},
    "guide": {"topic": "quickstart"},
}


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    """One workspace for the module: introspection reads, it never writes business data."""
    factory = Factory(db)
    workspace = await factory.workspace()
    await factory.add_key(workspace, "ro", scopes="mcp:read")
    return workspace


async def get(client: httpx.AsyncClient, ws: Workspace, label: str = "owner", **params: Any) -> httpx.Response:
    return await client.get(URL, params={k: str(v).lower() if isinstance(v, bool) else v
                                         for k, v in params.items()}, headers=ws.headers(label))


async def ok(client: httpx.AsyncClient, ws: Workspace, label: str = "owner", **params: Any) -> dict[str, Any]:
    r = await get(client, ws, label, **params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.parametrize("path", [URL, URL.rstrip("/")])
@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("dimension", list(DIMENSIONS))
async def test_every_dimension_answers_on_get_and_post_with_and_without_slash(
        client: httpx.AsyncClient, ws: Workspace, dimension: str, method: str, path: str) -> None:
    params = {"dimension": dimension, **DIMENSIONS[dimension]}
    if method == "GET":
        r = await client.get(path, params=params, headers=ws.headers())
    else:
        r = await client.post(path, json=params, headers=ws.headers())
    assert r.status_code == 200, r.text  # answered in place: no redirect between the two spellings
    assert r.json()["dimension"] == dimension


async def test_default_dimension_lists_usable_mega_tools_out_of_thirteen(client: httpx.AsyncClient,
                                                                          ws: Workspace) -> None:
    r = await client.post(URL, headers=ws.headers())  # no body at all
    body = r.json()
    assert r.status_code == 200 and body["dimension"] == "mega_tools"
    assert body["total_mega_tools"] == 13 == len(MEGA_TOOLS)
    by_name = {m["name"]: m for m in body["mega_tools"]}
    assert {"entity_crud", "report_query"} <= set(by_name) <= set(MEGA_TOOLS)
    assert by_name["entity_crud"]["tool"] == "prism_entity_crud"
    assert all(m["handlers"] > 0 for m in body["mega_tools"])
    assert {t["name"] for t in body["utility_tools"]} == {"prism_whoami", "prism_introspect", "prism_search"}


async def test_tree_dimensions_narrow_level_by_level(client: httpx.AsyncClient, ws: Workspace) -> None:
    everything = await ok(client, ws, dimension="apps", mega_tool="", app="  ")  # blank means no filter
    assert everything["filters"] == {} and everything["count"] >= 3
    apps = await ok(client, ws, dimension="apps", mega_tool="report_query")
    assert {"finance", "core"} <= {a["name"] for a in apps["apps"]}
    calls = await ok(client, ws, dimension="apps", mega_tool="integration_call")
    assert {a["name"] for a in calls["apps"]} == {"integrations"}
    entities = await ok(client, ws, dimension="entities", app="finance")
    invoice = next(e for e in entities["entities"] if e["name"] == "invoice")
    assert {"entity_crud", "report_query"} <= set(invoice["mega_tools"])
    assert "agingApSummary" in invoice["operations"]
    ops = await ok(client, ws, dimension="operations", mega_tool="entity_crud", app="spare_parts", entity="spare_part")
    by_op = {o["operation"]: o for o in ops["operations"]}
    assert {"list", "read", "create", "update", "delete"} <= set(by_op)
    assert all(o["mega_tool"] == "entity_crud" for o in ops["operations"])
    assert by_op["delete"]["destructive"] is True and by_op["delete"]["read_only"] is False
    assert by_op["list"] | {"description": ""} == {
        "coordinate": "entity_crud/spare_parts/spare_part/list", "mega_tool": "entity_crud", "app": "spare_parts",
        "entity": "spare_part", "operation": "list", "tool": "prism_entity_crud", "description": "",
        "scope": "read", "required_scope": "mcp:read", "permission": "spare_parts.view_spare_part", "cost": 1,
        "read_only": True, "destructive": False}


async def test_schema_gives_parameters_permission_and_a_recipe_that_works(client: httpx.AsyncClient,
                                                                         ws: Workspace) -> None:
    body = await ok(client, ws, dimension="schema", app="finance", entity="invoice", operation="create")
    assert body["coordinate"] == "entity_crud/finance/invoice/create"
    assert body["required_permission"] == "finance.add_invoice" and body["required_scope"] == "mcp:write"
    assert {"vendor_id", "number", "amount_cents"} <= set(body["parameters"]["required"])
    assert body["recipe"]["fill"] == ["vendor_id", "number"]
    listing = await ok(client, ws, dimension="schema", operation="entity_crud/spare_parts/spare_part/list")
    assert listing["parameters"]["properties"]["page_size"]["maximum"] == 100
    http = listing["recipe"]["http"]
    r = await client.request(http["method"], http["path"], json=http["body"], headers=ws.headers())
    assert r.status_code == 200 and r.json()["success"] is True
    r = await client.post(listing["recipe"]["prism_path"], json={}, headers=ws.headers())
    assert r.status_code == 200 and r.json()["data"]["page"] == 1


async def test_stats_and_paged_handlers_count_only_what_the_key_may_call(client: httpx.AsyncClient,
                                                                         ws: Workspace) -> None:
    owner = await ok(client, ws, dimension="stats")
    ro = await ok(client, ws, "ro", dimension="stats")
    assert owner["total_mega_tools"] == 13
    assert owner["handlers"] == sum(owner["by_scope"].values())
    # A key sees every handler but a person's own (minting and revoking keys: people_only).
    assert owner["handlers_total"] - owner["handlers"] == 2
    assert ro["handlers_total"] == owner["handlers_total"] > ro["handlers"] == ro["by_scope"]["read"]
    assert ro["by_scope"]["write"] == 0
    first = await ok(client, ws, dimension="handlers", limit=4, page=1)
    second = await ok(client, ws, dimension="handlers", limit=4, page=2)
    assert first["total"] == owner["handlers"] and first["page_size"] == 4 and len(first["items"]) == 4
    assert not {i["coordinate"] for i in first["items"]} & {i["coordinate"] for i in second["items"]}
    beyond = await ok(client, ws, dimension="handlers", limit=100, page=50)
    assert beyond["items"] == [] and beyond["total"] == owner["handlers"]


@pytest.mark.parametrize("label", ["ro", "viewer"])
async def test_read_only_keys_see_no_write_handlers_anywhere(client: httpx.AsyncClient, ws: Workspace,
                                                            label: str) -> None:
    ops = await ok(client, ws, label, dimension="operations")
    assert ops["operations"] and all(o["scope"] == "read" for o in ops["operations"])
    assert not {o["operation"] for o in ops["operations"]} & WRITE_OPERATIONS
    handlers = await ok(client, ws, label, dimension="handlers", limit=100)
    assert handlers["total"] == ops["count"]
    assert not {i["coordinate"].rsplit("/", 1)[1] for i in handlers["items"]} & WRITE_OPERATIONS
    for query in ("delete a spare part", "create invoice", "update stock level of a part"):
        found = await ok(client, ws, label, dimension="capability_search", query=query, limit=20)
        assert found["results"], query
        assert all(res["parts"]["operation"] not in WRITE_OPERATIONS for res in found["results"]), query
    r = await get(client, ws, label, dimension="schema", app="spare_parts", operation="delete")
    assert r.status_code == 404 and r.json()["error"] == "operation_not_found"
    entities = await ok(client, ws, label, dimension="entities", app="spare_parts")
    assert {"list", "read"} <= set(entities["entities"][0]["operations"])
    assert not set(entities["entities"][0]["operations"]) & WRITE_OPERATIONS


async def test_member_role_may_change_but_not_delete(client: httpx.AsyncClient, ws: Workspace) -> None:
    member = await ok(client, ws, "member", dimension="operations", entity="spare_part")
    operations = {o["operation"] for o in member["operations"]}
    assert {"list", "read", "create", "update"} <= operations and "delete" not in operations


@pytest.mark.parametrize("rerank", [False, True])
async def test_capability_search_ranks_the_right_handler_first(client: httpx.AsyncClient, ws: Workspace,
                                                               rerank: bool) -> None:
    body = await ok(client, ws, dimension="capability_search", query="overdue payables aging", rerank=rerank)
    top = body["results"][0]
    assert top["coordinate"] == "report_query/finance/invoice/agingApSummary"
    assert top["parts"] == {"mega_tool": "report_query", "app": "finance", "entity": "invoice",
                            "operation": "agingApSummary"}
    assert top["required_permission"] == "finance.view_invoice" and top["required_scope"] == "mcp:read"
    assert body["ranker"] == ("bm25+semantic-rerank" if rerank else "bm25")
    scores = [res["score"] for res in body["results"]]
    assert scores == sorted(scores, reverse=True)
    parts = await ok(client, ws, dimension="capability_search", query="low stock spare parts", rerank=rerank, limit=3)
    assert "entity_crud/spare_parts/spare_part/list" in [res["coordinate"] for res in parts["results"]]
    assert len(parts["results"]) == 3


async def test_capability_search_recipe_is_a_ready_call(client: httpx.AsyncClient, ws: Workspace) -> None:
    body = await ok(client, ws, dimension="capability_search", query="spare parts running low on stock", limit=1)
    recipe = body["results"][0]["recipe"]
    assert recipe["tool"] == "prism_entity_crud"
    assert recipe["http"] == {"method": "POST", "path": "/api/mcp/tools/prism_entity_crud/", "body": {
        "app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}}
    assert recipe["prism_path"] == "/prism/entity_crud/spare_parts/spare_part/list"
    r = await client.post(recipe["http"]["path"], json=recipe["http"]["body"], headers=ws.headers())
    assert r.json()["success"] is True
    r = await client.post(recipe["sandbox"]["path"], json=recipe["sandbox"]["body"], headers=ws.headers())
    assert r.status_code == 200 and "items" in r.json()


async def test_capability_search_honours_narrowing_and_limit(client: httpx.AsyncClient, ws: Workspace) -> None:
    body = await ok(client, ws, dimension="capability_search", query="invoice", mega_tool="report_query", limit=2)
    assert body["results"] and len(body["results"]) <= 2
    assert {res["parts"]["mega_tool"] for res in body["results"]} == {"report_query"}
    body = await ok(client, ws, dimension="capability_search", query="list records", limit=2)
    assert len(body["results"]) == 2
    body = await ok(client, ws, dimension="capability_search", query="the of and")
    assert body["results"] == [] and body["count"] == 0


async def test_capability_path_connects_through_a_shared_entity(client: httpx.AsyncClient, ws: Workspace) -> None:
    body = await ok(client, ws, dimension="capability_path", from_node="entity_crud/finance/invoice/list",
                    to_node="report_query/finance/invoice/agingApSummary")
    assert body["connected"] is True and body["hops"] == 4
    assert [s["node"] for s in body["path"]] == [
        "entity_crud/finance/invoice/list", "entity_crud/finance/invoice", "finance/invoice",
        "report_query/finance/invoice", "report_query/finance/invoice/agingApSummary"]
    assert [s.get("via") for s in body["path"]] == [None, "parent", "shared_entity", "shared_entity", "child"]
    assert body["crossings"] == ["finance/invoice"]
    tree = await ok(client, ws, dimension="capability_path", from_node="entity_crud",
                    to_node="entity_crud/spare_parts/spare_part")
    assert [s["kind"] for s in tree["path"]] == ["mega_tool", "app", "entity"] and tree["crossings"] == []
    by_name = await ok(client, ws, dimension="capability_path", from_node="vendor", to_node="finance")
    assert by_name["connected"] is True and by_name["from"] == {"node": "finance/vendor", "kind": "shared_entity"}
    same = await ok(client, ws, dimension="capability_path", from_node="finance", to_node="finance/")
    assert same["hops"] == 0


async def test_guide_overview_topics_and_a_quickstart_built_for_the_key(client: httpx.AsyncClient,
                                                                         ws: Workspace) -> None:
    overview = await ok(client, ws, dimension="guide")
    topics = {t["topic"] for t in overview["topics"]}
    assert {"quickstart", "authentication", "dispatch", "errors", "introspection", "pagination", "audit"} <= topics
    assert {s["heading"] for s in overview["sections"]} >= {"What Prism is", "The tree", "The doors"}
    for topic in topics - {"quickstart"}:
        body = await ok(client, ws, dimension="guide", topic=topic)
        assert body["topic"] == topic and body["sections"]
    quick = await ok(client, ws, "ro", dimension="guide", topic="quickstart")
    commands = " ".join(s.get("command", "") for s in quick["steps"])
    for needle in ("/api/v1/dev/ping/", "/api/v1/dev/me/", "/api/v1/dev/introspect/",
                   "/api/mcp/tools/prism_entity_crud/", '"operation":"list"', "Authorization: Bearer $PRISM_KEY"):
        assert needle in commands


@pytest.mark.parametrize(("params", "status", "code", "field"), [
    ({"dimension": "schema"}, 400, "invalid_arguments", "operation"),
    ({"dimension": "schema", "operation": "  "}, 400, "invalid_arguments", "operation"),
    ({"dimension": "capability_search"}, 400, "invalid_arguments", "query"),
    ({"dimension": "capability_path", "to_node": "finance"}, 400, "invalid_arguments", "from_node"),
    ({"dimension": "capability_path", "from_node": "finance"}, 400, "invalid_arguments", "to_node"),
    ({"dimension": "capability_path", "from_node": "finance", "to_node": "nowhere/at/all"}, 404, "node_not_found",
     "to_node"),
    ({"dimension": "guide", "topic": "astrology"}, 404, "topic_not_found", "topic"),
    ({"dimension": "schema", "operation": "list"}, 400, "ambiguous_operation", "operation"),
    ({"dimension": "schema", "operation": "agingSummary"}, 404, "operation_not_found", "operation"),
    ({"dimension": "apps", "mega_tool": "entity_crudd"}, 404, "mega_tool_not_found", "mega_tool"),
    ({"dimension": "operations", "app": "payroll"}, 404, "app_not_found", "app"),
    ({"dimension": "everything"}, 400, "invalid_arguments", "dimension"),
    ({"dimension": "handlers", "limit": 0}, 400, "invalid_arguments", "limit"),
    ({"dimension": "stats", "verbose": "yes"}, 400, "invalid_arguments", "verbose"),
])
async def test_client_mistakes_are_4xx_naming_the_field(client: httpx.AsyncClient, ws: Workspace,
                                                        params: dict[str, Any], status: int, code: str,
                                                        field: str) -> None:
    for r in (await client.get(URL, params=params, headers=ws.headers()),
              await client.post(URL.rstrip("/"), json=params, headers=ws.headers())):
        assert r.status_code == status, r.text
        body = r.json()
        assert body["error"] == code
        details = body.get("details", {})
        if status == 400:  # every 400 names its fields in one shape
            assert field in [e["field"] for e in details["errors"]], body
        else:
            assert details.get("field") == field, body


async def test_error_bodies_carry_what_helps_the_next_try(client: httpx.AsyncClient, ws: Workspace) -> None:
    r = await get(client, ws, dimension="guide", topic="astrology")
    assert "quickstart" in r.json()["details"]["topics"]
    r = await get(client, ws, dimension="schema", operation="list")
    assert "entity_crud/spare_parts/spare_part/list" in r.json()["details"]["candidates"]
    r = await get(client, ws, dimension="schema", operation="agingSummary")
    assert r.json()["details"]["suggestions"] == ["agingApSummary"]


async def test_introspection_needs_a_key_and_the_tool_the_read_scope(client: httpx.AsyncClient, ws: Workspace,
                                                                    factory: Factory) -> None:
    """The sandbox endpoint describes any valid key to itself (only what it may call); the tool is a read."""
    assert (await client.get(URL, headers={"Host": ws.host})).status_code == 401
    await factory.add_key(ws, "write_only", scopes="mcp:write")
    r = await get(client, ws, "write_only", dimension="stats")
    assert r.status_code == 200 and r.json()["by_scope"] == {"read": 0, "write": r.json()["handlers"], "execute": 0}
    r = await client.post("/api/v1/dev/call/", headers=ws.headers("write_only"),
                          json={"name": "prism_introspect", "arguments": {"dimension": "stats"}})
    assert r.status_code == 403 and r.json()["error"] == "permission_denied"


async def test_legacy_tool_and_canonical_door_answer_like_the_sandbox(client: httpx.AsyncClient,
                                                                      ws: Workspace) -> None:
    sandbox = await ok(client, ws, dimension="capability_search", query="aging", limit=2)
    r = await client.post("/api/v1/dev/call/", headers=ws.headers(), json={
        "name": "prism_introspect", "arguments": {"dimension": "capability_search", "query": "aging", "limit": 2}})
    assert r.status_code == 200 and r.json() == sandbox
    r = await client.post("/api/mcp/tools/prism_introspect/", headers=ws.headers(), json={
        "dimension": "schema", "operation": "whoami"})
    assert r.json()["success"] is True and r.json()["data"]["coordinate"] == "report_query/core/caller/whoami"
    r = await client.post("/api/mcp/tools/prism_introspect/", headers=ws.headers(), json={"dimension": "schema"})
    assert r.status_code == 400 and r.json()["success"] is False
    assert r.json()["details"]["errors"][0]["field"] == "operation"


# ---- a registry of 10,000 handlers, without the app or the database ---------------------------

class TinyParams(Params):
    id: str = Field(..., max_length=64)


async def _noop(call: HandlerCall, params: TinyParams) -> dict[str, Any]:
    return {}


NOUNS = ("account asset batch budget campaign contract customer device employee equipment expense fleet lead "
         "license meter order payment policy project purchase quote receipt route schedule shipment site task "
         "ticket timesheet warehouse claim lease loan").split()
VERBS = ("list", "read", "create", "update", "delete", "count", "search", "approve", "close", "export")
READS = {"list", "read", "count", "search", "export"}
NEEDLE_APP = f"app42_{NOUNS[42 % len(NOUNS)]}"
TREND = f"report_query/{NEEDLE_APP}/vehicle/fuelEfficiencyTrend"
RETIRE = f"workflow_action/{NEEDLE_APP}/vehicle/decommission"


def _large_registry() -> Registry:
    """100 apps, 10 entities each, 10 operations each, plus two distinctive handlers to find among them.
    Not frozen: schema generation is start-up work this test does not need."""
    registry = Registry()
    megas = list(MEGA_TOOLS)
    for a in range(100):
        app = HandlerApp(f"app{a}_{NOUNS[a % len(NOUNS)]}", description=f"Domain {NOUNS[(a * 7) % len(NOUNS)]}.")
        for e in range(10):
            entity = f"{NOUNS[(a + e) % len(NOUNS)]}_{NOUNS[(a * 3 + e) % len(NOUNS)]}{e}"
            for v, verb in enumerate(VERBS):
                if a == 99 and e == 9 and v >= 8:
                    continue  # room for the two handlers below: exactly 10,000 in all
                app.handler(megas[(a + e + v) % len(megas)], entity, verb, params=TinyParams,
                            scope="read" if verb in READS else "write",
                            description=f"{verb.title()} {' '.join(split_words(entity))} records.",
                            keywords=(NOUNS[(a + v) % len(NOUNS)],))(_noop)
        if a == 42:
            app.handler("report_query", "vehicle", "fuelEfficiencyTrend", params=TinyParams, scope="read",
                        description="Fuel efficiency trend of each vehicle over time, in litres per 100 km.",
                        keywords=("mileage", "consumption"))(_noop)
            app.handler("workflow_action", "vehicle", "decommission", params=TinyParams, scope="execute",
                        description="Retire a vehicle from the fleet.", keywords=("scrap", "retire"))(_noop)
        registry.add_app(app)
    return registry


def _auth(role: str = "owner", scopes: tuple[str, ...] = ("mcp:read", "mcp:write", "mcp:execute")) -> AuthContext:
    now = datetime.now(UTC)
    return AuthContext(tenant_id="t", tenant_subdomain="t", tenant_name=None, organization_id="o",
                       organization_name="Org", user_id="u", user_email="u@example.com", role=role,
                       permissions=PermissionSet(BUILTIN_ROLES[role]), scopes=frozenset(scopes),
                       credential_kind="api_key", credential_id="k", key_prefix="ck_x", key_name="k",
                       key_created_at=now, usage=KeyUsage(None))


def _search(registry: Registry, auth: AuthContext, query: str, **extra: Any) -> list[str]:
    body = introspect(registry, auth, IntrospectParams(dimension="capability_search", query=query, **extra))
    return [res["coordinate"] for res in body["results"]]


@pytest.fixture(scope="module")
def large() -> Registry:
    return _large_registry()


def test_capability_search_finds_the_needle_among_ten_thousand_handlers(large: Registry) -> None:
    assert len(large) == 10_000
    owner = _auth()
    for rerank in (False, True):
        assert _search(large, owner, "vehicle fuel efficiency trend", rerank=rerank)[0] == \
            TREND
        assert _search(large, owner, "fuel efficiencies of vehicles", rerank=rerank)[0] == \
            TREND
        assert _search(large, owner, "retire vehicles from the fleet", rerank=rerank)[0] == \
            RETIRE
    coordinate = next(h.path for h in large if h.coordinate.app.startswith("app7_") and h.coordinate.operation
                      == "approve")
    words = " ".join(coordinate.split("/")[1:])
    assert _search(large, owner, words, limit=3, rerank=True)[0] == coordinate
    assert index_for(large) is index_for(large)  # built once, on first use


def test_capability_search_at_scale_keeps_to_what_the_key_may_call(large: Registry) -> None:
    reader = _auth(scopes=("mcp:read",))
    results = _search(large, reader, "approve close delete decommission vehicle", limit=50)
    assert results and all(large.get_path(c).scope == "read" for c in results)  # type: ignore[union-attr]
    assert RETIRE not in results
    viewer = _auth(role="viewer")
    assert RETIRE not in _search(large, viewer, "decommission vehicle")
    narrowed = _search(large, _auth(), "list records", mega_tool="audit_query", limit=20)
    assert len(narrowed) == 20 and all(c.startswith("audit_query/") for c in narrowed)
    stats = introspect(large, reader, IntrospectParams(dimension="stats"))
    assert stats["handlers_total"] == 10_000 and stats["by_scope"]["write"] == stats["by_scope"]["execute"] == 0


def test_stemming_and_camel_case_meet_in_the_middle() -> None:
    assert split_words("agingApSummary") == ["aging", "ap", "summary"]
    assert split_words("entity_crud/spare_parts/HTTPRequestLog") == ["entity", "crud", "spare", "parts", "http",
                                                                       "request", "log"]
    assert {stem("invoices"), stem("invoice")} == {stem("invoice")}
    assert stem("policies") == stem("policy") and stem("approved") == stem("approve")
    assert stem("billing") == "bill" and stem("shipping") == "ship"
