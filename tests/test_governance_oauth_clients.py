"""Personas and AI systems on OAuth clients: an organization ties a client's tokens to its own persona and AI
system, on every door, in that organization only; attach, detach, deletion guards, the post-hoc audit, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from prism.governance.models import ClientGovernance, GovernanceDecision
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import SPEC_DECISION_FIELDS, entries, events, ok, post
from tests.oauth_support import CLIENT_BODIES, bearer, browser, register, tokens_for
from tests.processes import run_cli

NO_DELETES = {"name": "no-deletes", "deny": ["*/*/*/delete"], "default": "allow"}
MCP = "/api/mcp/sse"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def _token(app: object, ws: Workspace, client: dict[str, Any] | None = None) -> tuple[str, str]:
    """(access token, client_id) of the workspace owner through a real authorization-code flow."""
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws, client=client)
    return tokens["access_token"], tokens["client"]["client_id"]


async def _part(client: httpx.AsyncClient, ws: Workspace, sku: str) -> str:
    part: dict[str, Any] = await ok(client, ws, "entity_crud/spare_parts/spare_part/create",
                                    {"sku": sku, "name": f"part {sku}"})
    return str(part["id"])


async def _delete(client: httpx.AsyncClient, ws: Workspace, token: str, part_id: str) -> httpx.Response:
    return await client.post("/api/mcp/tools/prism_entity_crud/", headers={"Host": ws.host, **bearer(token)},
                             json={"app": "spare_parts", "entity": "spare_part", "operation": "delete",
                                   "arguments": {"id": part_id}})


async def _mcp_delete(client: httpx.AsyncClient, ws: Workspace, token: str, part_id: str) -> dict[str, Any]:
    headers = {"Host": ws.host, **bearer(token), **MCP_HEADERS}
    init = await client.post(MCP, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert init.status_code == 200, init.text
    answer = await client.post(MCP, headers={**headers, "Mcp-Session-Id": init.headers["mcp-session-id"]}, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "prism_entity_crud", "arguments": {
            "app": "spare_parts", "entity": "spare_part", "operation": "delete", "arguments": {"id": part_id}}}})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def _tie(client: httpx.AsyncClient, ws: Workspace, client_id: str) -> dict[str, Any]:
    """A deny-deletes persona and a high-risk AI system, both tied to the client's tokens in `ws`."""
    persona = await ok(client, ws, "config_manage/governance/persona/create", NO_DELETES)
    system = await ok(client, ws, "config_manage/governance/ai_system/create",
                      {"name": "connected assistant", "risk_level": "high"})
    tied = await ok(client, ws, "config_manage/governance/persona/attach",
                    {"client_id": client_id, "persona_id": persona["id"]})
    assert tied == {"client_id": client_id, "client_name": "Claude", "persona_id": persona["id"], "ai_system_id": None,
                    "changed": True}
    tied = await ok(client, ws, "config_manage/governance/ai_system/attach",
                    {"client_id": client_id, "ai_system_id": system["id"]})
    assert tied["persona_id"] == persona["id"] and tied["ai_system_id"] == system["id"]
    return {"persona": persona, "ai_system": system}


async def test_a_persona_tied_to_an_oauth_client_blocks_its_tokens_on_every_door(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    token, client_id = await _token(app, ws)
    made = await _tie(client, ws, client_id)
    part_id = await _part(client, ws, "P-1")

    refused = await _delete(client, ws, token, part_id)
    assert refused.status_code == 403 and refused.json()["error"] == "blocked", refused.text
    over_mcp = await _mcp_delete(client, ws, token, part_id)
    assert over_mcp["isError"] is True and json.loads(over_mcp["content"][0]["text"])["error"] == "blocked"

    # Both refusals are in the ledger, each with a BLOCK decision of the AI system and its event.
    last_two = (await entries(db, ws.org.id))[-2:]
    assert [(e.door, e.outcome, e.error_code) for e in last_two] == [("rest", "refused", "blocked"),
                                                                      ("mcp", "refused", "blocked")]
    assert all(e.detail["persona"]["id"] == made["persona"]["id"] for e in last_two)  # type: ignore[index]
    async with db.read() as session:
        decisions = (await session.execute(select(GovernanceDecision.decision).where(
            GovernanceDecision.organization_id == ws.org.id))).scalars().all()
    assert list(decisions) == ["BLOCK", "BLOCK"]
    blocks = await events(db, ws.org.id, "governance.decision.block")
    assert len(blocks) == 2 and SPEC_DECISION_FIELDS <= set(blocks[0]["data"])
    assert blocks[0]["data"]["ai_system"] == {"id": made["ai_system"]["id"], "name": "connected assistant"}
    # The part is still there, and a key without a persona in the same organization still may delete it.
    assert (await ok(client, ws, "entity_crud/spare_parts/spare_part/read", {"id": part_id}))["id"] == part_id
    await ok(client, ws, "entity_crud/spare_parts/spare_part/delete", {"id": part_id})


async def test_a_client_tie_holds_only_in_the_organization_that_made_it(
        app: object, client: httpx.AsyncClient, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    token, client_id = await _token(app, ws)
    other_token, other_client_id = await _token(app, other)
    assert other_client_id == client_id  # one registration, one client, for every tenant
    made = await _tie(client, ws, client_id)

    assert (await _delete(client, ws, token, await _part(client, ws, "A-1"))).status_code == 403
    # The same client acting for another tenant's user is not governed by this organization's persona ...
    answer = await _delete(client, other, other_token, await _part(client, other, "B-1"))
    assert answer.status_code == 200, answer.text
    # ... and that organization can neither use this one's persona nor see it.
    refused = await post(client, other, "config_manage/governance/persona/attach",
                         {"client_id": client_id, "persona_id": made["persona"]["id"]})
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"


async def test_attach_names_one_existing_holder_and_a_tied_persona_cannot_be_deleted(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    _, client_id = await _token(app, ws)
    made = await _tie(client, ws, client_id)
    persona_id, system_id = made["persona"]["id"], made["ai_system"]["id"]
    attach = "config_manage/governance/persona/attach"
    for arguments in ({"persona_id": persona_id}, {"key": "ck_whatever", "client_id": client_id}):
        answer = await post(client, ws, attach, arguments)
        assert answer.status_code == 400 and "exactly one of key and client_id" in answer.json()["message"]
    answer = await post(client, ws, attach, {"client_id": "no-such-client", "persona_id": persona_id})
    assert answer.status_code == 404

    deleted = await post(client, ws, "config_manage/governance/persona/delete", {"id": persona_id})
    assert deleted.status_code == 409 and deleted.json()["error"] == "persona_in_use"
    deleted = await post(client, ws, "config_manage/governance/ai_system/delete", {"id": system_id})
    assert deleted.status_code == 409 and deleted.json()["error"] == "ai_system_in_use"
    read = await ok(client, ws, "config_manage/governance/ai_system/read", {"id": system_id})
    assert (read["keys_tied"], read["clients_tied"]) == (0, 1)

    # Detaching both leaves nothing tied (the row goes), and then both may be deleted.
    await ok(client, ws, attach, {"client_id": client_id, "persona_id": None})
    await ok(client, ws, "config_manage/governance/ai_system/attach", {"client_id": client_id, "ai_system_id": None})
    async with db.read() as session:
        assert (await session.execute(select(ClientGovernance).where(
            ClientGovernance.organization_id == ws.org.id))).first() is None
    await ok(client, ws, "config_manage/governance/persona/delete", {"id": persona_id})
    await ok(client, ws, "config_manage/governance/ai_system/delete", {"id": system_id})


async def test_the_post_hoc_audit_rechecks_calls_made_with_oauth_tokens(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        cursor = await register(c, CLIENT_BODIES["cursor"])
    token, client_id = await _token(app, ws, cursor)
    persona = await ok(client, ws, "config_manage/governance/persona/create",
                       {"name": "lenient", "deny": [], "default": "allow"})
    await ok(client, ws, "config_manage/governance/persona/attach", {"client_id": client_id,
                                                                     "persona_id": persona["id"]})
    assert (await _delete(client, ws, token, await _part(client, ws, "C-1"))).status_code == 200

    await ok(client, ws, "config_manage/governance/persona/update", {"id": persona["id"], "deny": ["*/*/*/delete"]})
    report = await ok(client, ws, "governance_review/governance/audit/run", {"hours": 1})
    [violation] = report["violations"]
    assert violation["coordinate"] == "entity_crud/spare_parts/spare_part/delete"
    assert violation["policy_name"] == "lenient" and violation["severity"] == "high"
    assert len(await events(db, ws.org.id, "governance.violation.detected")) == 1


async def test_the_persona_command_ties_an_oauth_client(app: object, client: httpx.AsyncClient, factory: Factory,
                                                        database_url: str, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner",))
    token, client_id = await _token(app, ws)
    await ok(client, ws, "config_manage/governance/persona/create", NO_DELETES)
    done = run_cli("persona", "attach", "no-deletes", "--client", client_id, "--tenant", ws.tenant.subdomain,
                   "--json", database_url=database_url)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["client_id"] == client_id and out["persona_id"]
    assert (await _delete(client, ws, token, await _part(client, ws, "D-1"))).status_code == 403
    both = run_cli("persona", "attach", "no-deletes", "--client", client_id, "--key", "ck_x", "--tenant",
                   ws.tenant.subdomain, "--json", database_url=database_url)
    assert both.returncode != 0 and "exactly one of --key and --client" in both.stdout + both.stderr
