"""The post-hoc audit (CLI and handler) and the `prism persona` commands."""

from __future__ import annotations

import json

import httpx

from prism.keys.service import lookup_of
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import events, governed_key, ok, post
from tests.ledger_support import seal_waiting
from tests.processes import cli_json, run_cli

SPEC_VIOLATION_FIELDS = {"violation_id", "policy_name", "severity", "ai_system", "detected_at"}


async def test_the_post_hoc_audit_finds_a_violation_after_a_persona_is_tightened(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "lenient", "default": "allow"},
                              risk_level="high")
    part = await ok(client, ws, "entity_crud/spare_parts/spare_part/create", {"sku": "A1", "name": "a"})
    await ok(client, ws, "entity_crud/spare_parts/spare_part/delete", {"id": part["id"]}, label="agent")
    await ok(client, ws, "entity_crud/spare_parts/spare_part/list", {}, label="agent")
    await seal_waiting(db, ws.org.id)  # the audit reads sealed entries (on PostgreSQL, sealed just after the call)
    sub = ws.tenant.subdomain

    clean = cli_json("governance", "audit", "--tenant", sub, database_url=database_url)
    assert clean["checked"] == 2 and clean["violations"] == []

    tightened = cli_json("persona", "update", "lenient", "--tenant", sub, "--deny", "*/*/*/delete",
                         database_url=database_url)
    assert tightened["version"] == 2 and tightened["deny"] == ["*/*/*/delete"]
    report = cli_json("governance", "audit", "--tenant", sub, database_url=database_url)
    [violation] = report["violations"]
    assert violation["coordinate"] == "entity_crud/spare_parts/spare_part/delete"
    assert violation["severity"] == "high" and violation["policy_name"] == "lenient"
    [event] = await events(db, ws.org.id, "governance.violation.detected")
    assert SPEC_VIOLATION_FIELDS <= set(event["data"])
    assert event["event_id"] == event["data"]["violation_id"] == violation["violation_id"]
    assert event["data"]["ai_system"] == {"id": made["ai_system"]["id"], "name": "agent agent"}
    # Already reported: running again finds nothing new.
    assert cli_json("governance", "audit", "--tenant", sub, database_url=database_url)["violations"] == []
    listed = await ok(client, ws, "audit_query/governance/violation/list", {})
    assert [v["id"] for v in listed["items"]] == [violation["violation_id"]]
    # The ledger entry it names is the one the ledger's API shows under that id.
    entry = await ok(client, ws, "audit_query/ledger/entry/read", {"id": listed["items"][0]["audit_entry_id"]})
    assert entry["seq"] == violation["audit_seq"] and entry["coordinate"] == violation["coordinate"]


async def test_the_audit_handler_flags_calls_that_now_need_oversight(client: httpx.AsyncClient,
                                                                      factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona={"name": "p", "default": "allow"})
    await ok(client, ws, "entity_crud/finance/vendor/create", {"name": "V"}, label="agent")
    await seal_waiting(db, ws.org.id)
    await ok(client, ws, "config_manage/governance/persona/update",
             {"id": made["persona"]["id"], "oversight": ["entity_crud/finance/vendor/create"]})
    report = await ok(client, ws, "governance_review/governance/audit/run", {"hours": 1})
    [violation] = report["violations"]
    assert violation["severity"] == "medium" and violation["ai_system"] is None
    assert "without an approved oversight request" in violation["reason"]
    assert len(await events(db, ws.org.id, "governance.violation.detected")) == 1
    member_only = await factory.workspace(roles=("member",))
    refused = await post(client, member_only, "governance_review/governance/audit/run", {}, label="member")
    assert refused.status_code == 403


async def test_persona_commands_create_list_attach_and_refuse_deleting_one_in_use(
        client: httpx.AsyncClient, factory: Factory, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    await factory.add_key(ws, "agent")
    sub = ws.tenant.subdomain
    agent_key = lookup_of(ws.keys["agent"])
    assert agent_key is not None
    created = cli_json("persona", "create", "cli-persona", "--tenant", sub, "--deny", "*/*/*/delete",
                       "--allow", "entity_crud/*/*/*", "--default", "deny", "--cost-cap", "5",
                       database_url=database_url)
    assert (created["deny"], created["allow"], created["default"], created["cost_cap"]) == (
        ["*/*/*/delete"], ["entity_crud/*/*/*"], "deny", 5)
    listed = cli_json("persona", "list", "--tenant", sub, database_url=database_url)
    assert [p["name"] for p in listed["personas"]] == ["cli-persona"]
    attached = cli_json("persona", "attach", "cli-persona", "--key", agent_key, "--tenant", sub,
                        database_url=database_url)
    assert attached["persona_id"] == created["id"]
    blocked = await post(client, ws, "report_query/finance/invoice/agingApSummary", {}, label="agent")
    assert blocked.status_code == 403 and blocked.json()["error"] == "blocked"

    in_use = run_cli("persona", "delete", "cli-persona", "--tenant", sub, "--json", database_url=database_url)
    assert in_use.returncode == 1 and json.loads(in_use.stderr)["error"] == "persona_in_use"
    bad = run_cli("persona", "create", "x", "--tenant", sub, "--deny", "nope", "--json", database_url=database_url)
    assert bad.returncode == 1 and json.loads(bad.stderr)["error"] == "invalid_arguments"
    cli_json("persona", "attach", "none", "--key", agent_key, "--tenant", sub,
             database_url=database_url)
    assert cli_json("persona", "delete", "cli-persona", "--tenant", sub, database_url=database_url)["deleted"] is True
    none_left = run_cli("persona", "list", "--tenant", sub, database_url=database_url)
    assert none_left.returncode == 0 and none_left.stdout == "no personas\n"
    other = await factory.workspace(roles=("owner",))
    foreign = run_cli("persona", "attach", "none", "--key", str(lookup_of(other.keys["owner"])), "--tenant", sub,
                      "--json", database_url=database_url)
    assert foreign.returncode == 1 and json.loads(foreign.stderr)["error"] == "not_found"
