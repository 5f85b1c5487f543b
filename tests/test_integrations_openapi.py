"""Imported OpenAPI services: every operation a governed handler, called against a real HTTPS service that
checks each request against the same description (tests/integrations_upstream.py); credentials encrypted;
visible and callable only in the organization that enabled them; governed like every handler."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import select, text

from prism.app import create_app
from prism.config import Settings
from prism.integrations.models import IntegrationCall
from prism.models import AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, ok, post
from tests.integrations_upstream import RunningService, Scripted, SpecService
from tests.processes import cli_json, run_cli
from tests.test_mcp_protocol import call as mcp_call
from tests.test_mcp_protocol import headers_for, initialize, rpc, tool_text
from tests.webhooks_receiver import make_tls

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
SECRET = "wh-key-" + "s3cr3t" * 4

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


@pytest.fixture
async def upstream(tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SpecService]:
    """The warehouse service on loopback: the serving app's settings allow private networks and trust its CA."""
    tls = make_tls(tmp_path)
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhook_ca_bundle", str(tls.ca))
    running = RunningService(SpecService(yaml.safe_load(WAREHOUSE.read_text()), base_path="/v2",
                                         required_headers={"x-api-key": SECRET}), tls)
    yield await running.start()
    await running.stop()


def unique_name() -> str:
    return "wh_" + uuid.uuid4().hex[:10]


async def imported(client: httpx.AsyncClient, ws: Workspace, name: str, service: SpecService | None = None,
                   *, spec: str | None = None) -> dict[str, Any]:
    report: dict[str, Any] = await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
                                      {"name": name, "spec": spec or WAREHOUSE.read_text()})
    if service is not None:
        await ok(client, ws, "config_manage/integrations/connection/set", {
            "name": name, "base_url": service.url(), "auth_kind": "api_key", "header": "X-API-Key",
            "secret": SECRET})
    return report


async def call(client: httpx.AsyncClient, ws: Workspace, name: str, entity: str, operation: str,
               arguments: dict[str, Any], *, label: str = "owner", **extra: Any) -> httpx.Response:
    return await post(client, ws, f"integration_call/{name}/{entity}/{operation}", arguments, label=label, **extra)


async def test_every_operation_becomes_a_handler_and_calls_reach_the_service_as_the_spec_says(
        client: httpx.AsyncClient, factory: Factory, db: Database, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner", "viewer"))
    name = unique_name()
    report = await imported(client, ws, name, upstream)
    assert report["created"] is True and report["handlers"] == 6 and report["skipped"] == []
    assert report["added"] == ["health/getHealth", "items/createItem", "items/deleteItem", "items/getItem",
                               "items/listItems", "shipments/createShipment"]

    described = await ok(client, ws, "report_query/core/registry/introspect",
                         {"dimension": "operations", "mega_tool": "integration_call", "app": name, "entity": "items"})
    by_name = {o["operation"]: o for o in described["operations"]}
    assert set(by_name) == {"listItems", "createItem", "getItem", "deleteItem"}
    schema = await ok(client, ws, "report_query/core/registry/introspect", {
        "dimension": "schema", "mega_tool": "integration_call", "app": name, "entity": "items",
        "operation": "createItem"})
    body = schema["parameters"]["properties"]["body"]
    assert body["required"] == ["sku", "name"] and body["properties"]["sku"]["pattern"] == "^[A-Z]{3}-[0-9]{3}$"
    assert body["properties"]["parent"] == {"description": "(recursive: any value)"}  # NewItem inside NewItem
    # Its example requests (`x-prism-examples`): the strings, trimmed; what is not a string is ignored.
    assert schema["examples"] == ["put the 40 new hex bolts on the shelf", "we got a fresh crate of seals"]

    listed = await call(client, ws, name, "items", "listItems", {"page": 2, "category": "tool", "tag": ["a", "b"]})
    assert listed.status_code == 200, listed.text
    assert listed.json()["data"]["body"]["query"] == [["page", "2"], ["category", "tool"], ["tag", "a"], ["tag", "b"]]
    read = await call(client, ws, name, "items", "getItem", {"itemId": 7, "X-Request-Source": "prism"})
    assert read.status_code == 200 and read.json()["data"]["body"]["path"] == "/v2/items/7"
    created = await call(client, ws, name, "items", "createItem",
                         {"body": {"sku": "ABC-123", "name": "Bearing", "quantity": 4}})
    assert (created.status_code, created.json()["data"]["status"]) == (200, 201)
    shipped = await call(client, ws, name, "shipments", "createShipment",
                         {"body": {"destination": "Plant 2", "lines": [{"item_id": 7, "quantity": 2}]}})
    assert shipped.json()["data"]["status"] == 202
    deleted = await call(client, ws, name, "items", "deleteItem", {"itemId": 7})
    assert deleted.json()["data"] == {"status": 204, "body": None}

    assert upstream.invalid == []  # every request Prism built fits the description
    assert [a.operation_id for a in upstream.arrived] == ["listItems", "getItem", "createItem",
                                                          "shipments/create-shipment", "deleteItem"]
    assert upstream.arrived[1].headers["x-request-source"] == "prism"
    # Read-only hint from GET, destructive from DELETE, the declared cost, an RBAC permission per entity.
    handlers = by_name
    assert handlers["listItems"]["scope"] == "read" and handlers["deleteItem"]["destructive"] is True
    assert handlers["createItem"]["cost"] == 3
    viewer_delete = await call(client, ws, name, "items", "deleteItem", {"itemId": 7}, label="viewer")
    assert viewer_delete.status_code == 403 and f"{name}.delete_items" in viewer_delete.json()["message"]
    assert (await call(client, ws, name, "items", "getItem", {"itemId": 1}, label="viewer")).status_code == 200

    async with db.read() as session:
        calls = (await session.execute(select(IntegrationCall).where(
            IntegrationCall.organization_id == ws.org.id).order_by(IntegrationCall.created_at))).scalars().all()
        audited = (await session.execute(select(AuditEntry.coordinate, AuditEntry.outcome).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.coordinate.like(f"integration_call/{name}/%"))
        )).all()
    assert [(c.method, c.upstream_status, c.outcome) for c in calls] == [
        ("GET", 200, "ok"), ("GET", 200, "ok"), ("POST", 201, "ok"), ("POST", 202, "ok"), ("DELETE", 204, "ok"),
        ("GET", 200, "ok")]
    assert len(audited) == 7 and ("integration_call/" + name + "/items/deleteItem", "refused") in audited


async def test_arguments_are_checked_against_the_service_schema_before_anything_is_sent(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    cases = [({}, "itemId", "getItem"), ({"itemId": 0}, "itemId", "getItem"),
             ({"itemId": 1, "colour": "red"}, "colour", "getItem"),
             ({"body": {"sku": "bad", "name": "x"}}, "body.sku", "createItem"),
             ({}, "body", "createItem")]
    for arguments, field, operation in cases:
        response = await call(client, ws, name, "items", operation, arguments)
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_arguments"
        assert field in [e["field"] for e in response.json()["details"]["errors"]], response.json()
    assert upstream.arrived == [] and upstream.invalid == []


async def test_upstream_failures_answer_clear_envelopes_and_only_idempotent_calls_are_retried(
        client: httpx.AsyncClient, factory: Factory, db: Database, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    upstream.script("getItem", Scripted(404, {"message": "no item 9"}))
    missing = await call(client, ws, name, "items", "getItem", {"itemId": 9})
    assert missing.status_code == 502
    assert missing.json()["error"] == "upstream_error" and missing.json()["details"]["upstream_status"] == 404
    assert "no item 9" in missing.json()["details"]["upstream_body"]

    upstream.script("getItem", Scripted(503), Scripted(503), Scripted(200, {"id": 9}))
    retried = await call(client, ws, name, "items", "getItem", {"itemId": 9})
    assert retried.status_code == 200 and retried.json()["data"]["body"] == {"id": 9}
    upstream.script("createItem", Scripted(503), Scripted(201, {"id": 1}))
    not_retried = await call(client, ws, name, "items", "createItem", {"body": {"sku": "ABC-001", "name": "x"}})
    assert not_retried.status_code == 502 and not_retried.json()["details"]["upstream_status"] == 503

    await ok(client, ws, "config_manage/integrations/connection/set", {
        "name": name, "base_url": upstream.url(), "auth_kind": "api_key", "header": "X-API-Key", "secret": SECRET,
        "timeout_seconds": 1})
    upstream.script("getItem", Scripted(200, {}, delay=2.5))
    slow = await call(client, ws, name, "items", "getItem", {"itemId": 1})
    assert slow.status_code == 504 and slow.json()["error"] == "upstream_timeout"

    closed = f"https://127.0.0.1:{_free_port()}/v2"
    await ok(client, ws, "config_manage/integrations/connection/set", {"name": name, "base_url": closed})
    down = await call(client, ws, name, "items", "getItem", {"itemId": 1})
    assert down.status_code == 502 and down.json()["error"] == "upstream_unreachable"
    async with db.read() as session:
        outcomes = (await session.execute(select(IntegrationCall.outcome, IntegrationCall.attempts).where(
            IntegrationCall.organization_id == ws.org.id).order_by(IntegrationCall.created_at))).all()
    assert [tuple(o) for o in outcomes] == [("upstream_error", 1), ("ok", 3), ("upstream_error", 1),
                                            ("upstream_timeout", 1), ("upstream_unreachable", 3)]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_private_targets_are_refused_unless_the_deployment_allows_them(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name)
    for url in ("https://127.0.0.1:8443/v2", "https://10.0.0.5/", "https://169.254.169.254/latest"):
        refused = await post(client, ws, "config_manage/integrations/connection/set", {"name": name, "base_url": url})
        assert refused.status_code == 400 and refused.json()["error"] == "url_not_allowed", refused.text


async def test_the_secret_is_encrypted_and_never_shown(client: httpx.AsyncClient, factory: Factory, db: Database,
                                                        upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    [listed] = (await ok(client, ws, "config_manage/integrations/connection/list", {}))["items"]
    assert listed["has_secret"] is True and listed["auth_settings"] == {"header": "X-API-Key"}
    assert SECRET not in str(listed)
    async with db.read() as session:
        stored = (await session.execute(text(
            "SELECT secret_encrypted FROM integration_connections WHERE organization_id = :o"), {"o": ws.org.id})
        ).scalar_one()
    assert stored and SECRET not in stored
    # The secret opens for its row only: copied onto another organization's row it does not.
    assert (await call(client, ws, name, "items", "getItem", {"itemId": 1})).status_code == 200
    assert upstream.arrived[-1].headers["x-api-key"] == SECRET


async def test_another_organization_sees_and_calls_none_of_it(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService, app: Any) -> None:
    a = await factory.workspace(roles=("owner",))
    b = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, a, name, upstream)

    assert (await call(client, a, name, "items", "getItem", {"itemId": 1})).status_code == 200
    refused = await call(client, b, name, "items", "getItem", {"itemId": 1})
    assert refused.status_code == 404 and refused.json()["error"] == "operation_not_found"
    bad_args = await call(client, b, name, "items", "getItem", {"nothing": True})  # no schema leaks either
    assert bad_args.status_code == 404

    async def listings(ws: Workspace) -> list[str]:
        """The tool catalog, MCP tools/list, the tenant's OpenAPI descriptor, introspection and search."""
        tools = await client.get("/api/v1/dev/tools/", headers=ws.headers("owner"))
        session = await initialize(client, headers_for(ws))
        mcp = await mcp_call(client, headers_for(ws), session, rpc("tools/list", {}))
        descriptor = await client.get("/.well-known/openapi.json", headers=ws.headers("owner"))
        tree = await ok(client, ws, "report_query/core/registry/introspect", {"dimension": "apps"})
        search = await ok(client, ws, "report_query/core/registry/introspect",
                          {"dimension": "capability_search", "query": "remove an item from warehouse stock"})
        return [tools.text, mcp.text, descriptor.text, str(tree), str(search)]

    assert all(name in seen for seen in await listings(a))
    assert not any(name in seen for seen in await listings(b))
    # Nor counted: the handlers that exist for B are the built-in ones only, as if nothing had been imported.
    stats_a, stats_b = [await ok(client, ws, "report_query/core/registry/introspect", {"dimension": "stats"})
                        for ws in (a, b)]
    assert stats_a["handlers_total"] > stats_b["handlers_total"] == len(
        [h for h in app.state.registry if h.integration is None])
    # A governed call over MCP, as an agent makes it.
    session = await initialize(client, headers_for(a))
    answer = await mcp_call(client, headers_for(a), session, rpc("tools/call", {
        "name": "prism_integration_call",
        "arguments": {"app": name, "entity": "items", "operation": "getItem", "arguments": {"itemId": 4}}}))
    is_error, envelope = tool_text(answer)
    assert not is_error and envelope["data"]["body"]["path"] == "/v2/items/4"
    session_b = await initialize(client, headers_for(b))
    refused_b = await mcp_call(client, headers_for(b), session_b, rpc("tools/call", {
        "name": "prism_integration_call",
        "arguments": {"app": name, "entity": "items", "operation": "getItem", "arguments": {"itemId": 4}}}))
    assert tool_text(refused_b) == (True, {**tool_text(refused_b)[1], "error": "operation_not_found"})

    for arguments in ({"name": name, "base_url": upstream.url()},):
        taken = await post(client, b, "config_manage/integrations/connection/set", arguments)
        assert taken.status_code == 404, taken.text
    clash = await post(client, b, "config_manage/integrations/integration/importOpenapi",
                       {"name": name, "spec": WAREHOUSE.read_text()})
    assert clash.status_code == 409 and clash.json()["error"] == "conflict"
    gone = await post(client, b, "config_manage/integrations/integration/remove", {"name": name})
    assert gone.status_code == 404
    listed = await ok(client, b, "config_manage/integrations/integration/list", {})
    assert name not in [i["name"] for i in listed["items"]]


async def test_a_reference_indexing_a_list_with_anything_but_ascii_digits_points_at_nothing(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """"²" passes str.isdigit() and int() refuses it: the spec is refused, never a 500."""
    ws = await factory.workspace(roles=("owner",))
    for index in ("²", "1²", "9" * 5000):
        listing = {"operationId": "listItems", "parameters": [{"$ref": f"#/x-shared/{index}"}],
                   "responses": {"200": {"description": "ok"}}}
        spec = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/items": {"get": listing}},
                "x-shared": [{"name": "q", "in": "query", "schema": {"type": "string"}}]}
        refused = await post(client, ws, "config_manage/integrations/integration/importOpenapi",
                             {"name": unique_name(), "spec": json.dumps(spec)})
        assert refused.status_code == 400 and "points at nothing" in refused.json()["message"], refused.text


async def test_reimport_updates_in_place_and_removal_removes_the_handlers(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    again = await imported(client, ws, name)
    assert (again["created"], again["added"], again["removed"], again["changed"]) == (False, [], [], [])
    document = yaml.safe_load(WAREHOUSE.read_text())
    del document["paths"]["/shipments"]
    document["paths"]["/items"]["get"]["parameters"].append({"name": "site", "in": "query",
                                                             "schema": {"type": "string"}})
    document["paths"]["/bins"] = {"get": {"tags": ["bins"], "operationId": "listBins",
                                          "responses": {"200": {"description": "ok"}}}}
    changed = await imported(client, ws, name, spec=yaml.safe_dump(document))
    assert (changed["added"], changed["removed"], changed["changed"]) == (
        ["bins/listBins"], ["shipments/createShipment"], ["items/listItems"])
    assert changed["revision"] == 2
    gone = await call(client, ws, name, "shipments", "createShipment", {"body": {}})
    assert gone.status_code == 404
    # The new parameter is accepted by Prism and sent; this service still implements the old description.
    new_parameter = await call(client, ws, name, "items", "listItems", {"site": "north"})
    assert new_parameter.status_code == 502 and new_parameter.json()["details"]["upstream_status"] == 400
    assert upstream.invalid == ["unknown query parameter site"]

    removed = await ok(client, ws, "config_manage/integrations/integration/remove", {"name": name})
    assert removed == {"name": name, "removed": True, "handlers": 6}
    after = await call(client, ws, name, "items", "getItem", {"itemId": 1})
    assert after.status_code == 404 and after.json()["error"] == "operation_not_found"
    assert (await ok(client, ws, "config_manage/integrations/connection/list", {}))["items"] == []


async def test_governance_applies_persona_oversight_and_budget(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    await governed_key(factory, client, ws, "agent", persona={
        "name": "no-deletes", "default": "allow", "deny": [f"integration_call/{name}/*/delete*"],
        "oversight": [f"integration_call/{name}/shipments/*"]})

    blocked = await call(client, ws, name, "items", "deleteItem", {"itemId": 3}, label="agent")
    assert blocked.status_code == 403 and blocked.json()["error"] == "blocked"
    assert (await call(client, ws, name, "items", "getItem", {"itemId": 3}, label="agent")).status_code == 200
    shipment = {"body": {"destination": "Plant 9", "lines": [{"item_id": 3, "quantity": 1}]}}
    escalated = await call(client, ws, name, "shipments", "createShipment", shipment, label="agent")
    assert escalated.status_code == 202 and escalated.json()["error"] == "oversight_required"
    request_id = escalated.json()["details"]["oversight_request_id"]
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    approved = await call(client, ws, name, "shipments", "createShipment", shipment, label="agent",
                          headers={"X-Prism-Oversight-Request": request_id})
    assert approved.status_code == 200, approved.text
    assert [a.operation_id for a in upstream.arrived] == ["getItem", "shipments/create-shipment"]

    mission = await ok(client, ws, "mission_control/missions/mission/create", {"name": "restock", "budget_ceiling": 5})
    await ok(client, ws, "mission_control/missions/mission/start", {"id": mission["id"]})
    spend = {"X-Prism-Mission": mission["id"]}
    item = {"body": {"sku": "ABC-777", "name": "Seal"}}
    first = await call(client, ws, name, "items", "createItem", item, headers=spend)  # cost 3 (x-prism-cost)
    second = await call(client, ws, name, "items", "createItem", item, headers=spend)
    assert first.status_code == 200 and (second.status_code, second.json()["error"]) == (403, "budget_exceeded")
    read = await ok(client, ws, "mission_control/missions/mission/read", {"id": mission["id"]})
    assert read["spent"] == 3


async def test_a_deployment_import_from_the_cli_reaches_a_running_server_without_a_restart(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    imported_cli = await asyncio.to_thread(cli_json, "integration", "import-openapi", str(WAREHOUSE), "--app", name,
                                           database_url=settings.database_url)
    assert imported_cli["handlers"] == 6 and imported_cli["created"] is True
    connected = await asyncio.to_thread(
        cli_json, "integration", "connect", name, "--tenant", ws.tenant.subdomain, "--base-url", upstream.url(),
        "--auth", "api_key", "--header", "X-API-Key", database_url=settings.database_url,
        PRISM_CONNECTION_SECRET=SECRET, PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true")
    assert connected["has_secret"] is True and SECRET not in str(connected)
    for _ in range(100):  # the server notices within PRISM_INTEGRATIONS_REFRESH_SECONDS (2 s)
        answer = await call(client, ws, name, "items", "getItem", {"itemId": 5})
        if answer.status_code != 404:
            break
        await asyncio.sleep(0.1)
    assert answer.status_code == 200, answer.text
    assert upstream.arrived[-1].headers["x-api-key"] == SECRET
    removed = await asyncio.to_thread(cli_json, "integration", "remove", name, database_url=settings.database_url)
    assert removed["removed"] is True
    for _ in range(100):
        if (await call(client, ws, name, "items", "getItem", {"itemId": 5})).status_code == 404:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the removal never reached the server")


async def test_organizations_connected_to_one_deployment_integration_each_call_with_their_own_connection(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, db: Database, upstream: SpecService) -> None:
    a = await factory.workspace(roles=("owner",))
    b = await factory.workspace(roles=("owner",))
    name = unique_name()
    await asyncio.to_thread(cli_json, "integration", "import-openapi", str(WAREHOUSE), "--app", name,
                            database_url=settings.database_url)
    for ws, header, secret in ((a, "X-API-Key", SECRET), (b, "X-Other-Key", "b-" + SECRET)):
        await asyncio.to_thread(
            cli_json, "integration", "connect", name, "--tenant", ws.tenant.subdomain, "--base-url", upstream.url(),
            "--auth", "api_key", "--header", header, database_url=settings.database_url,
            PRISM_CONNECTION_SECRET=secret, PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true")
    try:
        async def first_call(ws: Workspace, item: int) -> httpx.Response:
            for _ in range(100):  # the server notices within PRISM_INTEGRATIONS_REFRESH_SECONDS (2 s)
                answer = await call(client, ws, name, "items", "getItem", {"itemId": item})
                if answer.status_code != 404:
                    break
                await asyncio.sleep(0.1)
            return answer

        answer_a = await first_call(a, 5)
        assert answer_a.status_code == 200, answer_a.text
        assert upstream.arrived[-1].headers["x-api-key"] == SECRET
        # B's call carries B's credential, which this service does not accept: its refusal is B's alone.
        answer_b = await first_call(b, 6)
        assert answer_b.status_code == 502 and answer_b.json()["details"]["upstream_status"] == 400, answer_b.text
        assert "x-api-key missing or wrong" in answer_b.json()["details"]["upstream_body"]
        assert (await call(client, a, name, "items", "getItem", {"itemId": 7})).status_code == 200
        async with db.read() as session:
            records = {org: [(r.path, r.outcome) for r in (await session.execute(
                select(IntegrationCall).where(IntegrationCall.organization_id == org)
                .order_by(IntegrationCall.created_at))).scalars()] for org in (a.org.id, b.org.id)}
        items = upstream.url() + "/items/"
        assert records == {a.org.id: [(items + "5", "ok"), (items + "7", "ok")],
                           b.org.id: [(items + "6", "upstream_error")]}
    finally:
        await asyncio.to_thread(cli_json, "integration", "remove", name, database_url=settings.database_url)


async def test_an_app_built_on_a_served_registry_serves_todays_integrations_once(
        app: Any, settings: Settings, client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    second = create_app(settings, registry=app.state.registry)  # already holds this integration's handlers
    async with second.router.lifespan_context(second):
        paths = [h.path for h in second.state.registry if h.integration == name]
        assert len(paths) == len(set(paths)) == 6
        transport = httpx.ASGITransport(app=second)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as other:
            assert (await call(other, ws, name, "items", "getItem", {"itemId": 2})).status_code == 200


async def test_basic_and_oauth2_client_credentials_reach_the_service(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name)
    base = upstream.url()
    upstream.required_headers = {"authorization": "Basic " + base64.b64encode(b"svc-user:pa55-word").decode()}
    await ok(client, ws, "config_manage/integrations/connection/set", {
        "name": name, "base_url": base, "auth_kind": "basic", "username": "svc-user", "secret": "pa55-word"})
    assert (await call(client, ws, name, "items", "getItem", {"itemId": 1})).status_code == 200

    upstream.oauth_client = ("prism-client", "client-s3cret")
    upstream.required_headers = {"authorization": f"Bearer {upstream.access_token}"}
    await ok(client, ws, "config_manage/integrations/connection/set", {
        "name": name, "base_url": base, "auth_kind": "oauth2_client_credentials", "client_id": "prism-client",
        "token_url": f"https://127.0.0.1:{upstream.port}/oauth/token", "secret": "client-s3cret"})
    for item in (1, 2):
        assert (await call(client, ws, name, "items", "getItem", {"itemId": item})).status_code == 200
    assert upstream.tokens_issued == 1  # kept until it expires
    await ok(client, ws, "config_manage/integrations/connection/set", {
        "name": name, "base_url": base, "auth_kind": "oauth2_client_credentials", "client_id": "prism-client",
        "token_url": f"https://127.0.0.1:{upstream.port}/oauth/token", "secret": "wrong"})
    refused = await call(client, ws, name, "items", "getItem", {"itemId": 3})
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_unreachable"
    assert "token endpoint refused" in refused.json()["message"] and "wrong" not in refused.text
    assert upstream.invalid == [] and len(upstream.arrived) == 3


TRAVERSABLE = """
openapi: 3.0.3
info: {title: Stock, version: "1"}
paths:
  /items/{a}/{b}/stock:
    get:
      operationId: getStock
      tags: [items]
      parameters:
        - {name: a, in: path, required: true, schema: {type: string}}
        - {name: b, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
"""


async def test_a_path_parameter_never_moves_the_request_to_another_path(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    """`..` in a path parameter would be resolved away by the URL (`/v2/items/../../stock` is `/stock`): the call
    would reach another endpoint, above the connection's base path, with the organization's credential."""
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream, spec=TRAVERSABLE)
    for a, b in ((".."), ("..")), ((".", "x")), (("x", "")):
        refused = await call(client, ws, name, "items", "getStock", {"a": a, "b": b})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
        assert [e["field"] for e in refused.json()["details"]["errors"]] == ["a" if a in ("", ".", "..") else "b"]
    assert upstream.arrived == [] and upstream.invalid == []


async def test_a_credential_under_review_is_masked_for_reviewers_and_never_stored(
        client: httpx.AsyncClient, factory: Factory, db: Database, upstream: SpecService) -> None:
    """Oversight keeps a call's arguments for its reviewers: a secret among them (a connection's credential) is
    kept masked, while the approval stays bound to the arguments as sent."""
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name)
    await governed_key(factory, client, ws, "agent", persona={
        "name": "reviewed-credentials", "default": "allow", "oversight": ["config_manage/integrations/connection/*"]})
    connection = {"name": name, "base_url": upstream.url(), "auth_kind": "api_key", "header": "X-API-Key",
                  "secret": SECRET}
    escalated = await post(client, ws, "config_manage/integrations/connection/set", connection, label="agent")
    assert escalated.status_code == 202, escalated.text
    request_id = escalated.json()["details"]["oversight_request_id"]
    shown = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
    assert shown["arguments"]["secret"] == "********" and shown["arguments"]["base_url"] == upstream.url()
    async with db.read() as session:
        stored = (await session.execute(text("SELECT arguments FROM oversight_requests WHERE id = :id"),
                                        {"id": request_id})).scalar_one()
    assert SECRET not in str(stored)
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    approved = await post(client, ws, "config_manage/integrations/connection/set", connection, label="agent",
                          headers={"X-Prism-Oversight-Request": request_id})
    assert approved.status_code == 200, approved.text
    assert (await call(client, ws, name, "items", "getItem", {"itemId": 1})).status_code == 200  # the real secret


# What a description may cost: its size once its references are inlined, its nesting, its keys and numbers.

def _fanning_out(levels: int, width: int) -> str:
    """A few KB of JSON whose schema L<i> has `width` properties that each refer to L<i+1>: width**levels copies."""
    schemas: dict[str, Any] = {f"L{i}": {"type": "object", "properties": {
        f"p{j}": {"$ref": f"#/components/schemas/L{i + 1}"} for j in range(width)}} for i in range(levels)}
    schemas[f"L{levels}"] = {"type": "string"}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    return json.dumps({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
                       "paths": {"/x": {"post": {"operationId": "x", "requestBody": body, "responses": {}}}},
                       "components": {"schemas": schemas}})


def _aliased(levels: int) -> str:
    """YAML whose anchors each use the previous one ten times: ten times larger per line once expanded."""
    lines = ["openapi: 3.0.3", "info: {title: t, version: '1'}", "x-a0: &a0 {type: string}"]
    for i in range(1, levels + 1):
        uses = ", ".join(f"p{j}: *a{i - 1}" for j in range(10))
        lines.append(f"x-a{i}: &a{i} {{type: object, properties: {{{uses}}}}}")
    lines.append(f"paths: {{/x: {{post: {{operationId: x, requestBody: {{content: {{application/json: "
                 f"{{schema: *a{levels}}}}}}}, responses: {{}}}}}}}}")
    return "\n".join(lines)


def _nested(levels: int) -> str:
    """A request body whose schema nests `levels` objects deep, as JSON text (written out: too deep to encode)."""
    schema = '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + "}}" * levels
    return ('{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"post": {'
            '"operationId": "x", "requestBody": {"content": {"application/json": {"schema": ' + schema + "}}}}}}}")


async def _refused(client: httpx.AsyncClient, ws: Workspace, spec: str | dict[str, Any]) -> str:
    answer = await post(client, ws, "config_manage/integrations/integration/importOpenapi",
                        {"name": unique_name(), "spec": spec})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_openapi", answer.text[:500]
    message: str = answer.json()["message"]
    return message


async def test_a_description_that_expands_beyond_the_budget_is_refused_and_yaml_aliases_are_not_read(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """2.3 KB of references fanning out five ways over eight levels: 390,625 copies, refused by what the import
    would produce. YAML aliases expand the same way without any reference: they are refused as such."""
    ws = await factory.workspace(roles=("owner",))
    fanned = _fanning_out(8, 5)
    assert len(fanned) < 2500
    assert "POST /x: its schemas, references inlined, exceed 200,000 nodes" in await _refused(client, ws, fanned)
    assert "YAML aliases" in await _refused(client, ws, _aliased(4))
    # Fanning out within the budget is imported as before (a reference used at many places is inlined at each).
    report = await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
                      {"name": unique_name(), "spec": _fanning_out(4, 5)})
    assert report["handlers"] == 1


async def test_deep_nesting_is_refused_as_an_invalid_description_never_a_500(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, tmp_path: Path) -> None:
    """Around 250 levels JSON encoders give up (storing the operations); around 1,000 the resolver ran out of
    stack; beyond 1,024 orjson refuses the text and the YAML reader counts the levels in turn."""
    ws = await factory.workspace(roles=("owner",))
    for levels in (60, 150, 500):  # 60 objects are 120 levels of JSON
        assert "a schema nests deeper than 100 levels" in await _refused(client, ws, _nested(levels)), levels
    assert "nested too deeply to read" in await _refused(client, ws, _nested(1200))
    # YAML is read by libyaml, whose composer recurses in C: nesting is counted before it reads (100,000 levels
    # would end the process), and past 1,000 the description is refused before anything is built.
    yaml_text = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {/x: " + "[" * 100_000 + "]" * 100_000 + "}"
    assert "nested too deeply to read (more than 1000 levels)" in await _refused(client, ws, yaml_text)
    # Given as a JSON object rather than text: past what JSON encoders nest, refused the same way.
    assert "nested too deeply" in await _refused(client, ws, json.loads(_nested(150)))
    # The CLI says so in one line, without a traceback.
    deep = tmp_path / "deep.json"
    deep.write_text(_nested(500))
    result = await asyncio.to_thread(run_cli, "integration", "import-openapi", str(deep), "--app", unique_name(),
                                     "--json", database_url=settings.database_url)
    assert result.returncode != 0 and result.error["error"] == "invalid_openapi", str(result)


async def test_keys_that_are_not_strings_and_numbers_beyond_the_budget_units_are_refused_with_their_place(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """YAML reads `1:` as a number: paths could not be sorted, schemas not stored. A cost beyond what a budget
    can charge (or beyond 64 bits) is refused; a cost that is not a whole number is ignored, as before."""
    ws = await factory.workspace(roles=("owner",))
    head = "openapi: 3.0.3\ninfo: {title: k, version: '1'}\npaths:\n"
    body = "      requestBody: {content: {application/json: {schema: %s}}}\n"
    cases = {
        head + "  /a: {get: {operationId: a}}\n  1: {get: {operationId: b}}\n": "paths: the key 1 is not a string",
        head + "  /a:\n    post:\n" + body % "{type: object, properties: {1: {type: string}}}":
            "POST /a: the key 1 is not a string",
        head + "  /a:\n    post:\n" + body % "{type: integer, maximum: 99999999999999999999999}":
            "POST /a: a number in a schema is larger than 64 bits",
        head + "  /a:\n    post:\n" + body % "{type: string, default: !!binary aGVsbG8=}":
            "POST /a: a bytes value is not JSON",
        head + "  /a: {get: {operationId: a, x-prism-cost: 99999999999999999999999}}\n":
            "GET /a: x-prism-cost must be a whole number from 0 to 10000",
        head + "  /a: {get: {operationId: a, x-prism-cost: 10001}}\n":
            "GET /a: x-prism-cost must be a whole number from 0 to 10000",
    }
    for spec, problem in cases.items():
        assert problem in await _refused(client, ws, spec), spec


CLASHING = """
openapi: 3.0.3
info: {title: Clash, version: '1'}
servers: [{url: "https://clash.example.com/v1"}]
paths:
  /items/{id}:
    post:
      operationId: updateItem
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: query_id, in: query, schema: {type: string, enum: [abc]}}
        - {name: id, in: query, schema: {type: integer}}
        - {name: body, in: query, schema: {type: string, enum: [b]}}
        - {name: request_body, in: query, schema: {type: string, enum: [r]}}
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {n: {type: integer}}}
      responses:
        "200": {description: ok}
"""


async def test_renamed_parameters_never_take_another_ones_name_and_each_value_goes_where_it_belongs(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A path `id` and a query `id`: the query one is `query_id`, unless the description has a `query_id` of its
    own; then `query_id2`. The same for the body beside parameters called `body` and `request_body`."""
    tls = make_tls(tmp_path)
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhook_ca_bundle", str(tls.ca))
    running = RunningService(SpecService(yaml.safe_load(CLASHING), base_path="/v1"), tls)
    service = await running.start()
    try:
        ws = await factory.workspace(roles=("owner",))
        name = unique_name()
        await ok(client, ws, "config_manage/integrations/integration/importOpenapi", {"name": name, "spec": CLASHING})
        await ok(client, ws, "config_manage/integrations/connection/set", {"name": name, "base_url": service.url()})
        schema = (await ok(client, ws, "report_query/core/registry/introspect", {
            "dimension": "schema", "mega_tool": "integration_call", "app": name, "entity": "items",
            "operation": "updateItem"}))["parameters"]
        assert schema["properties"]["query_id"]["type"] == "string"
        assert schema["properties"]["query_id2"]["type"] == "integer"
        assert set(schema["properties"]) == {"id", "query_id", "query_id2", "body", "request_body",
                                             "request_body2"}
        arguments = {"id": "seven", "query_id": "abc", "query_id2": 5, "body": "b", "request_body": "r",
                     "request_body2": {"n": 1}}
        answer = await call(client, ws, name, "items", "updateItem", arguments)
        assert answer.status_code == 200, answer.text
        assert service.invalid == []
        arrived = service.arrived[0]
        assert arrived.path == "/v1/items/seven" and arrived.body == {"n": 1}
        assert sorted(arrived.query) == [("body", "b"), ("id", "5"), ("query_id", "abc"), ("request_body", "r")]
    finally:
        await running.stop()


ODD_SCHEMAS = """
openapi: 3.1.0
info: {title: Zoo, version: "1"}
paths:
  /weights:
    get:
      tags: [animals]
      operationId: weighByKind
      summary: Weigh a giraffe by its kind.
      parameters:
        - {name: kind, in: query, schema: {type: bogus}}
      responses: {"200": {description: ok}}
  /boxes:
    post:
      tags: [animals]
      operationId: boxPet
      summary: Put a giraffe in a box.
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: [a, b]}
      responses: {"200": {description: ok}}
  /giraffes:
    post:
      tags: [animals]
      operationId: registerGiraffe
      summary: Register a giraffe at the zoo with free-form metadata.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name, meta]
              properties:
                name: {type: string}
                meta: true
                never: false
      responses: {"201": {description: ok}}
"""


async def test_invalid_or_unusual_schemas_of_a_description_break_no_call_descriptor_or_search(
        client: httpx.AsyncClient, factory: Factory, tmp_path: Path, settings: Settings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An invalid schema (an unknown type, `properties` as a list) leaves its operation's arguments checked for
    their shape only; boolean sub-schemas (valid in OpenAPI 3.1) are honoured. Neither takes down the
    organization's descriptor, capability search or tools/list, nor another organization's."""
    tls = make_tls(tmp_path)
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhook_ca_bundle", str(tls.ca))
    # The service as it really behaves: what its description meant to say.
    meant = ODD_SCHEMAS.replace("{type: bogus}", "{type: string}").replace("properties: [a, b]", "properties: {}")
    running = RunningService(SpecService(yaml.safe_load(meant)), tls)
    service = await running.start()
    try:
        ws = await factory.workspace(roles=("owner",))
        other = await factory.workspace(roles=("owner",))
        name = unique_name()
        await ok(client, ws, "config_manage/integrations/integration/importOpenapi",
                 {"name": name, "spec": ODD_SCHEMAS})
        await ok(client, ws, "config_manage/integrations/connection/set", {"name": name, "base_url": service.url()})
        for operation, arguments in (("weighByKind", {"kind": "tall"}), ("boxPet", {"body": {"a": 1}}),
                                     ("registerGiraffe", {"body": {"name": "Gina", "meta": {"spots": [1]}}})):
            answered = await call(client, ws, name, "animals", operation, arguments)
            assert answered.status_code == 200, (operation, answered.text)
        refused = await call(client, ws, name, "animals", "registerGiraffe",
                             {"body": {"name": "Gina", "meta": 1, "never": 0}})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments"
        assert len(service.arrived) == 3 and service.invalid == []

        for owner in (ws, other):
            descriptor = await client.get("/.well-known/openapi.json", headers=owner.headers("owner"))
            assert descriptor.status_code == 200, descriptor.text[:300]
            assert (f"/prism/integration_call/{name}/animals/registerGiraffe" in descriptor.text) is (owner is ws)
        found = await ok(client, ws, "report_query/core/registry/introspect",
                         {"dimension": "capability_search", "query": "register a giraffe", "limit": 10})
        assert "registerGiraffe" in {r["parts"]["operation"] for r in found["results"]}
        searched = await ok(client, ws, "report_query/core/registry/search", {"query": "weigh a giraffe", "limit": 10})
        assert {"weighByKind", "boxPet"} <= {r["parts"]["operation"] for r in searched["results"]}
        session = await initialize(client, headers_for(ws))
        listed = await mcp_call(client, headers_for(ws), session, rpc("tools/list", {}))
        assert listed.status_code == 200 and "prism_integration_call" in listed.text
    finally:
        await running.stop()


async def test_an_answer_nested_too_deep_to_pass_on_is_an_upstream_error_and_recorded_as_one(
        client: httpx.AsyncClient, factory: Factory, db: Database, upstream: SpecService) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    upstream.script("getItem", Scripted(200, b"[" * 300 + b"]" * 300), Scripted(200, b"[" * 200 + b"]" * 200))
    refused = await call(client, ws, name, "items", "getItem", {"itemId": 1})
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert "200 levels" in refused.json()["message"] and refused.json()["details"]["upstream_status"] == 200
    deep_enough = await call(client, ws, name, "items", "getItem", {"itemId": 1})
    assert deep_enough.status_code == 200, deep_enough.text[:300]
    async with db.read() as session:
        outcomes = (await session.execute(select(IntegrationCall.outcome).where(
            IntegrationCall.organization_id == ws.org.id).order_by(IntegrationCall.created_at))).scalars().all()
    assert outcomes == ["upstream_error", "ok"]


ESCAPED_REFERENCE = """
openapi: 3.0.3
info: {title: Escaped, version: "1"}
paths:
  /things/{id}:
    get:
      operationId: getThing
      tags: [things]
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
        - $ref: "#/paths/~1things~1%7Bid%7D/get/x-shared-parameters/0"
      x-shared-parameters:
        - {name: verbose, in: query, schema: {$ref: "#/components/schemas/Flag%20value"}}
      responses: {"200": {description: ok}}
components:
  schemas:
    Flag value: {type: boolean}
"""


async def test_a_reference_is_a_uri_fragment_percent_decoded_before_its_pointer_is_read(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    """RFC 6901: a JSON Pointer in a URI fragment is percent-encoded (`{` as `%7B`, a space as `%20`), as several
    published descriptions write theirs."""
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    report = await imported(client, ws, name, upstream, spec=ESCAPED_REFERENCE)
    assert report["added"] == ["things/getThing"] and report["skipped"] == []
    schema = await ok(client, ws, "report_query/core/registry/introspect", {
        "dimension": "schema", "mega_tool": "integration_call", "app": name, "entity": "things",
        "operation": "getThing"})
    assert schema["parameters"]["properties"]["verbose"]["type"] == "boolean"


async def test_an_upstream_that_echoes_the_credential_back_never_shows_it_to_the_caller(
        client: httpx.AsyncClient, factory: Factory, upstream: SpecService) -> None:
    """A gateway's error page or a debugging endpoint may answer with the request's headers: the caller (any
    member who may call the operation) must not learn the organization's credential from them."""
    ws = await factory.workspace(roles=("owner",))
    name = unique_name()
    await imported(client, ws, name, upstream)
    encoded = base64.b64encode(SECRET.encode()).decode()
    upstream.script("getItem", Scripted(403, {"denied": {"x-api-key": SECRET, "seen": encoded}}),
                    Scripted(200, {"headers": {"x-api-key": SECRET}}))
    refused = await call(client, ws, name, "items", "getItem", {"itemId": 1})
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text
    assert SECRET not in refused.text and encoded not in refused.text
    assert refused.json()["details"]["upstream_body"].count("********") == 2
    answered = await call(client, ws, name, "items", "getItem", {"itemId": 2})
    assert answered.status_code == 200, answered.text
    assert answered.json()["data"]["body"] == {"headers": {"x-api-key": "********"}}
