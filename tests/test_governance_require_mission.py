"""A persona's `require_mission`: a governed credential's call that could spend or change something and names no
mission is refused 403 `blocked` (rule `require_mission`, a BLOCK decision), after the persona's own refusals and
before oversight; read-only calls of cost 0 and the self-descriptions (whoami, introspection, capability search) run
without one. Existing personas are upgraded to false."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import select

from prism.governance.gate import needs_mission
from prism.governance.models import Persona
from prism.keys.service import lookup_of
from prism.migrate import alembic_config, migrate_with_alembic
from prism.registry.registry import build_registry
from prism.storage import Database, one_shot_engine
from tests.factories import Factory, Workspace
from tests.governance_support import entries, events, governed_key, ok, post
from tests.migration_support import with_app_db
from tests.oauth_support import browser, field, sign_in
from tests.processes import cli_json, run_cli, scratch_database
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text

PERSONA = "config_manage/governance/persona"
MISSION = "mission_control/missions/mission"
CREATE = "entity_crud/spare_parts/spare_part/create"  # a write of declared cost 1
LIST = "entity_crud/spare_parts/spare_part/list"  # a read of declared cost 1
WHOAMI = "report_query/core/caller/whoami"
INTROSPECT = "report_query/core/registry/introspect"
DECISIONS = "audit_query/governance/decision/list"
OVERSIGHT_LIST = "governance_review/governance/oversight_request/list"


async def _agent(factory: Factory, client: httpx.AsyncClient, ws: Workspace, **persona: Any) -> dict[str, Any]:
    made = await governed_key(factory, client, ws, "agent", risk_level="high",
                              persona={"name": "agent", "default": "allow", "require_mission": True, **persona})
    persona_record: dict[str, Any] = made["persona"]
    return persona_record


async def _active_mission(client: httpx.AsyncClient, ws: Workspace, budget: int = 10) -> dict[str, Any]:
    made = await ok(client, ws, f"{MISSION}/create", {"name": "restock", "budget_ceiling": budget})
    started: dict[str, Any] = await ok(client, ws, f"{MISSION}/start", {"id": made["id"]})
    return started


def _refused_for_no_mission(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    body = response.json()
    assert (body["error"], body["details"]["rule"]) == ("blocked", "require_mission"), body
    assert "X-Prism-Mission" in body["message"] and "mission_id" in body["message"], body


async def test_a_costed_write_without_a_mission_is_blocked_and_runs_and_is_charged_under_one(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    persona = await _agent(factory, client, ws)
    assert persona["require_mission"] is True

    refused = await post(client, ws, CREATE, {"sku": "A1", "name": "bolt"}, label="agent")
    _refused_for_no_mission(refused)
    assert refused.json()["details"]["persona_id"] == persona["id"]
    assert (await ok(client, ws, LIST, {}))["total"] == 0  # nothing was written
    decisions = [d for d in (await ok(client, ws, DECISIONS, {"page_size": 50}))["items"] if d["coordinate"] == CREATE]
    assert [(d["decision"], d["policies_violated"]) for d in decisions] == [("BLOCK", 1)]
    assert decisions[0]["primary_reason"].startswith("blocked: ")
    blocks = [e for e in await events(db, ws.org.id, "governance.decision.block") if e["data"]["coordinate"] == CREATE]
    assert len(blocks) == 1
    [entry] = [e for e in await entries(db, ws.org.id) if e.coordinate == CREATE]
    assert entry.detail["persona"]["rule"] == "require_mission"

    mission = await _active_mission(client, ws)
    ran = await post(client, ws, CREATE, {"sku": "A1", "name": "bolt"}, label="agent",
                     headers={"X-Prism-Mission": mission["id"]})
    assert ran.status_code == 200, ran.text
    enveloped = await post(client, ws, CREATE, {"sku": "A2", "name": "nut"}, label="agent",
                           envelope={"mission_id": mission["id"]})
    assert enveloped.status_code == 200, enveloped.text
    read = await ok(client, ws, f"{MISSION}/read", {"id": mission["id"]})
    assert read["spent"] == 2
    # A costed read spends the mission's budget too, so it needs one as well.
    _refused_for_no_mission(await post(client, ws, LIST, {}, label="agent"))


async def test_the_self_descriptions_run_without_a_mission(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await _agent(factory, client, ws)
    who = await post(client, ws, WHOAMI, {}, label="agent")
    assert who.status_code == 200, who.text
    described = await post(client, ws, INTROSPECT, {}, label="agent")
    assert described.status_code == 200, described.text


def test_only_read_only_handlers_of_cost_zero_and_the_self_descriptions_are_exempt() -> None:
    registry = build_registry()
    read, write = registry.get_path(LIST), registry.get_path(CREATE)
    assert read is not None and write is not None
    assert not needs_mission(dataclasses.replace(read, cost=0))
    assert needs_mission(read)
    assert needs_mission(dataclasses.replace(write, cost=0))  # a free write still changes something
    for path in (WHOAMI, INTROSPECT, "report_query/core/registry/search"):
        handler = registry.get_path(path)
        assert handler is not None and not needs_mission(handler)


async def test_a_deny_still_wins_and_no_oversight_request_is_opened_for_a_call_without_a_mission(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await _agent(factory, client, ws, deny=[CREATE], oversight=[LIST])
    mission = await _active_mission(client, ws)
    for headers in ({}, {"X-Prism-Mission": mission["id"]}):
        denied = await post(client, ws, CREATE, {"sku": "A1", "name": "bolt"}, label="agent", headers=headers)
        assert denied.status_code == 403 and denied.json()["details"]["rule"] == "deny", denied.text
    _refused_for_no_mission(await post(client, ws, LIST, {}, label="agent"))
    assert (await ok(client, ws, OVERSIGHT_LIST, {}))["total"] == 0
    held = await post(client, ws, LIST, {}, label="agent", headers={"X-Prism-Mission": mission["id"]})
    assert held.status_code == 202, held.text
    assert (await ok(client, ws, OVERSIGHT_LIST, {}))["total"] == 1


async def test_an_update_turns_it_on_and_off_and_takes_only_a_boolean(client: httpx.AsyncClient,
                                                                        factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "agent", "default": "allow"})
    persona = made["persona"]
    assert (persona["require_mission"], persona["version"]) == (False, 1)
    assert (await post(client, ws, CREATE, {"sku": "A1", "name": "a"}, label="agent")).status_code == 200
    on = await ok(client, ws, f"{PERSONA}/update", {"id": persona["id"], "require_mission": True})
    assert (on["require_mission"], on["version"]) == (True, 2)
    _refused_for_no_mission(await post(client, ws, CREATE, {"sku": "A2", "name": "b"}, label="agent"))
    off = await ok(client, ws, f"{PERSONA}/update", {"id": persona["id"], "require_mission": False})
    assert (off["require_mission"], off["version"]) == (False, 3)
    assert (await post(client, ws, CREATE, {"sku": "A3", "name": "c"}, label="agent")).status_code == 200
    for value in (1, "true", None):
        refused = await post(client, ws, f"{PERSONA}/update", {"id": persona["id"], "require_mission": value})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
        assert "require_mission" in refused.json()["message"]
    refused = await post(client, ws, f"{PERSONA}/create", {"name": "other", "require_mission": 0})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
    assert (await ok(client, ws, f"{PERSONA}/read", {"id": persona["id"]}))["version"] == 3


async def test_the_cli_sets_it_on_create_and_update(client: httpx.AsyncClient, factory: Factory,
                                                    database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    await factory.add_key(ws, "agent")
    sub = ws.tenant.subdomain
    created = cli_json("persona", "create", "cli-persona", "--tenant", sub, "--default", "allow",
                       "--require-mission", database_url=database_url)
    assert (created["require_mission"], created["version"]) == (True, 1)
    plain = cli_json("persona", "create", "plain", "--tenant", sub, database_url=database_url)
    assert plain["require_mission"] is False
    listed = run_cli("persona", "list", "--tenant", sub, database_url=database_url)
    lines = {line.split("\t")[0]: line for line in listed.stdout.splitlines()}
    assert lines["cli-persona"].endswith("\tmission required") and "mission" not in lines["plain"], listed
    cli_json("persona", "attach", "cli-persona", "--key", str(lookup_of(ws.keys["agent"])), "--tenant", sub,
             database_url=database_url)
    _refused_for_no_mission(await post(client, ws, CREATE, {"sku": "A1", "name": "a"}, label="agent"))
    changed = cli_json("persona", "update", "cli-persona", "--tenant", sub, "--no-require-mission",
                       database_url=database_url)
    assert (changed["require_mission"], changed["version"]) == (False, 2)
    assert (await post(client, ws, CREATE, {"sku": "A1", "name": "a"}, label="agent")).status_code == 200
    untouched = run_cli("persona", "update", "cli-persona", "--tenant", sub, "--cost-cap", "5", "--json",
                        database_url=database_url)
    assert untouched.returncode == 0, untouched


async def test_another_tenants_setting_has_no_effect(client: httpx.AsyncClient, factory: Factory) -> None:
    strict, relaxed = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await _agent(factory, client, strict)
    await governed_key(factory, client, relaxed, "agent", persona={"name": "agent", "default": "allow"})
    ran = await post(client, relaxed, CREATE, {"sku": "A1", "name": "a"}, label="agent")
    assert ran.status_code == 200, ran.text
    _refused_for_no_mission(await post(client, strict, CREATE, {"sku": "A1", "name": "a"}, label="agent"))
    # Another tenant's mission is no mission here: unknown, and the call is not run.
    theirs = await _active_mission(client, relaxed)
    foreign = await post(client, strict, CREATE, {"sku": "A1", "name": "a"}, label="agent",
                         headers={"X-Prism-Mission": theirs["id"]})
    assert foreign.status_code == 404 and foreign.json()["error"] == "mission_not_found", foreign.text
    assert (await ok(client, relaxed, f"{MISSION}/read", {"id": theirs["id"]}))["spent"] == 0


async def test_the_console_form_sets_it_with_a_checkbox(app: Any, client: httpx.AsyncClient,
                                                         factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/governance/")).status_code == 303
        org = {"org": ws.org.id}
        token = field((await c.get("/console/governance/", params=org)).text, "csrf_token")
        ticked = await c.post("/console/governance/persona/", params=org, data={
            "csrf_token": token, "name": "ticked", "default": "allow", "require_mission": "on"})
        unticked = await c.post("/console/governance/persona/", params=org, data={
            "csrf_token": token, "name": "unticked", "default": "allow"})
        forged = await c.post("/console/governance/persona/", params=org, data={
            "csrf_token": "not-the-token", "name": "forged", "require_mission": "on"})
        shown = (await c.get("/console/governance/", params=org)).text
    assert (ticked.status_code, unticked.status_code) == (303, 303), (ticked.text, unticked.text)
    assert forged.status_code in (400, 403)
    made = {p["name"]: p["require_mission"] for p in (await ok(client, ws, f"{PERSONA}/list", {}))["items"]}
    assert made == {"ticked": True, "unticked": False}
    assert "Requires a mission" in shown and 'name="require_mission"' in shown


async def test_an_mcp_resource_read_names_no_mission_so_it_is_refused_and_the_tool_with_one_reads(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    uploaded = await ok(client, ws, "document_op/documents/document/upload", {"title": "Plan", "content": "Q3."})
    await _agent(factory, client, ws)
    headers = headers_for(ws, "agent")
    session = await initialize(client, headers, "2025-11-25")
    uri = f"prism://documents/document/{uploaded['id']}"
    refused = (await call(client, headers, session, rpc("resources/read", {"uri": uri}, request_id=2))).json()
    assert (refused["error"]["code"], refused["error"]["data"]["error"]) == (-32602, "blocked"), refused
    mission = await _active_mission(client, ws)
    read = (await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud", "arguments": {
        "app": "documents", "entity": "document", "operation": "read", "arguments": {"id": uploaded["id"]},
        "mission_id": mission["id"]}}, request_id=3))).json()
    assert read["result"]["isError"] is False, read


BEFORE = "0023_documents_unicode_words"


async def _stored_settings(url: str) -> dict[str, bool]:
    """Each persona's require_mission as stored, read without starting Prism (which would upgrade first)."""
    engine = one_shot_engine(url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(select(Persona.name, Persona.require_mission))).all()
    finally:
        await engine.dispose()
    return {name: value for name, value in rows}


async def test_the_upgrade_keeps_existing_personas_at_false(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "require_mission") as url:
        await asyncio.to_thread(migrate_with_alembic, url)

        async def fill(db: Database) -> None:
            ws = await Factory(db).workspace(roles=("owner",))
            async with db.write() as session:
                for name, value in (("older", False), ("strict", True)):
                    session.add(Persona(organization_id=ws.org.id, tenant_id=ws.tenant.id, name=name,
                                        description="", allow=[], deny=[], oversight=[], default_effect="allow",
                                        require_mission=value))

        await with_app_db(url, fill)
        config = alembic_config(url)
        await asyncio.to_thread(command.downgrade, config, BEFORE)  # as a Prism before the setting stored them
        await asyncio.to_thread(command.upgrade, config, "head")
        assert await _stored_settings(url) == {"older": False, "strict": False}


async def test_over_mcp_the_same_calls_are_exempt_or_refused_as_over_rest(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """Every MCP method that reaches data goes through the dispatcher with the credential's persona: tools/call
    (both tool surfaces) and resources/read (a document read). The self-descriptions run without a mission; a
    costed read, through a tool or as a resource, is refused for naming none, and a persona's deny outranks it."""
    ws = await factory.workspace(roles=("owner",))
    uploaded = await ok(client, ws, "document_op/documents/document/upload", {"title": "Plan", "content": "Q3."})
    await _agent(factory, client, ws, deny=["entity_crud/documents/document/read"])
    headers = headers_for(ws, "agent")
    session = await initialize(client, headers, "2025-11-25")
    answers = {}
    for request_id, (name, arguments) in enumerate((
            ("prism_whoami", {}), ("prism_introspect", {"dimension": "apps"}), ("prism_search", {"query": "parts"}),
            ("prism_entity_crud", {"app": "spare_parts", "entity": "spare_part", "operation": "list"}),
            ("prism_entity_crud_read", {"app": "spare_parts", "entity": "spare_part", "operation": "list"}),
            ("prism_entity_crud", {"app": "documents", "entity": "document", "operation": "read",
                                   "arguments": {"id": uploaded["id"]}})), start=2):
        is_error, body = tool_text(await call(client, headers, session, rpc(
            "tools/call", {"name": name, "arguments": arguments}, request_id=request_id)))
        answers[name + ("/document" if "document" in str(arguments) else "")] = (
            (body["error"], body["details"]["rule"]) if is_error else "ran")
    assert answers == {"prism_whoami": "ran", "prism_introspect": "ran", "prism_search": "ran",
                       "prism_entity_crud": ("blocked", "require_mission"),
                       "prism_entity_crud_read": ("blocked", "require_mission"),
                       "prism_entity_crud/document": ("blocked", "deny")}
    uri = f"prism://documents/document/{uploaded['id']}"
    read = (await call(client, headers, session, rpc("resources/read", {"uri": uri}, request_id=9))).json()
    assert (read["error"]["code"], read["error"]["data"]["error"]) == (-32602, "blocked"), read
    rules = [(e.door, e.detail["persona"]["rule"]) for e in await entries(db, ws.org.id)
             if e.coordinate == "entity_crud/documents/document/read"]
    assert rules == [("mcp", "deny"), ("mcp", "deny")]  # the tool call and the resource read alike
