"""A governed credential (one with a persona or an AI system) cannot change personas or AI systems: an agent's key
acting for an owner would otherwise lift its own persona, loosen it, or untie itself from its AI system, and go on
ungoverned. People (the console, the CLI) and ungoverned keys keep managing them."""

from __future__ import annotations

from typing import Any

import httpx

from prism.keys.service import lookup_of
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import entries, governed_key, ok, post
from tests.oauth_support import bearer, browser, tokens_for

GATED = {"name": "gated-vendors", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"]}
CREATE = "entity_crud/finance/vendor/create"
PERSONA, SYSTEM = "config_manage/governance/persona", "config_manage/governance/ai_system"


async def _governed(client: httpx.AsyncClient, factory: Factory) -> tuple[Workspace, dict[str, Any]]:
    ws = await factory.workspace(roles=("owner",))
    made = await governed_key(factory, client, ws, "agent", persona=GATED, risk_level="high")
    return ws, made


async def test_a_governed_key_cannot_lift_loosen_or_untie_its_own_governance(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws, made = await _governed(client, factory)
    own = lookup_of(ws.keys["agent"])
    persona_id, system_id = made["persona"]["id"], made["ai_system"]["id"]
    attempts = [
        (f"{PERSONA}/update", {"id": persona_id, "oversight": []}),
        (f"{PERSONA}/attach", {"key": own, "persona_id": None}),
        (f"{PERSONA}/create", {"name": "lenient", "default": "allow"}),
        (f"{PERSONA}/delete", {"id": persona_id}),
        (f"{SYSTEM}/attach", {"key": own, "ai_system_id": None}),
        (f"{SYSTEM}/update", {"id": system_id, "risk_level": "minimal"}),
        (f"{SYSTEM}/create", {"name": "another", "risk_level": "minimal"}),
        (f"{SYSTEM}/delete", {"id": system_id}),
    ]
    for path, arguments in attempts:
        refused = await post(client, ws, path, arguments, label="agent")
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json()["error"] == "governed_credential", (path, refused.text)
    # Nothing changed: the persona still holds the call for a person, and the refusals were BLOCK decisions.
    held = await post(client, ws, CREATE, {"name": "Acme"}, label="agent")
    assert held.status_code == 202, held.text
    persona = await ok(client, ws, f"{PERSONA}/read", {"id": persona_id})
    assert persona["oversight"] == GATED["oversight"] and persona["version"] == 1
    decisions = await ok(client, ws, "audit_query/governance/decision/list", {"decision": "BLOCK", "page_size": 50})
    assert sum(d["primary_reason"].startswith("governed_credential") for d in decisions["items"]) == len(attempts)
    refused_entries = [e for e in await entries(db, ws.org.id) if e.error_code == "governed_credential"]
    assert len(refused_entries) == len(attempts)


async def test_an_ungoverned_key_of_the_organization_still_manages_them(client: httpx.AsyncClient,
                                                                         factory: Factory) -> None:
    ws, made = await _governed(client, factory)
    own = lookup_of(ws.keys["agent"])
    updated = await ok(client, ws, f"{PERSONA}/update", {"id": made["persona"]["id"], "oversight": []})
    assert updated["version"] == 2
    assert (await ok(client, ws, f"{PERSONA}/attach", {"key": own, "persona_id": None}))["changed"] is True
    assert (await ok(client, ws, f"{SYSTEM}/attach", {"key": own, "ai_system_id": None}))["changed"] is True
    # Ungoverned now, the agent's key runs the call at once, and may manage governance like any owner's key.
    assert (await post(client, ws, CREATE, {"name": "Acme"}, label="agent")).status_code == 200
    assert (await post(client, ws, f"{PERSONA}/create", {"name": "later"}, label="agent")).status_code == 200


async def test_a_governed_key_of_another_tenant_finds_nothing_here_either(client: httpx.AsyncClient,
                                                                          factory: Factory) -> None:
    ws, _ = await _governed(client, factory)
    other, _ = await _governed(client, factory)
    refused = await post(client, other, f"{PERSONA}/attach",
                         {"key": lookup_of(ws.keys["agent"]), "persona_id": None}, label="agent")
    assert refused.status_code == 403 and refused.json()["error"] == "governed_credential"
    # Its ungoverned owner key is told the key does not exist in its organization, as before.
    foreign = await post(client, other, f"{PERSONA}/attach", {"key": lookup_of(ws.keys["agent"]), "persona_id": None})
    assert foreign.status_code == 404
    held = await post(client, ws, CREATE, {"name": "Acme"}, label="agent")
    assert held.status_code == 202, held.text


async def test_a_governed_key_cannot_decide_another_persons_held_call(client: httpx.AsyncClient,
                                                                       factory: Factory) -> None:
    ws, _ = await _governed(client, factory)
    # Another person's agent, an owner too, governed only by an AI system (its decisions are recorded).
    await governed_key(factory, client, ws, "other-agent", risk_level="limited")
    await factory.add_key(ws, "reviewer", role="owner")
    held = [(await post(client, ws, CREATE, {"name": name}, label="agent")).json()["details"]["oversight_request_id"]
            for name in ("Acme", "Globex")]
    for operation, request_id in zip(("approve", "reject"), held, strict=True):
        refused = await post(client, ws, f"governance_review/governance/oversight_request/{operation}",
                             {"id": request_id, "note": "an agent's"}, label="other-agent")
        assert refused.status_code == 403 and refused.json()["error"] == "governed_credential", refused.text
        still = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
        assert still["status"] == "pending" and still["decided_by"] is None
    # The agent's own call is still refused as a self-approval first, as docs/governance.md walks through.
    own = await post(client, ws, "governance_review/governance/oversight_request/approve", {"id": held[0]},
                     label="agent")
    assert own.status_code == 403 and own.json()["error"] == "self_approval_forbidden"
    # A person's ungoverned key decides, and the approved call runs once.
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": held[0]}, label="reviewer")
    ran = await post(client, ws, CREATE, {"name": "Acme"}, label="agent",
                     headers={"X-Prism-Oversight-Request": held[0]})
    assert ran.status_code == 200, ran.text
    # Once decided, an agent is still refused for what it is (a BLOCK decision), not told the request's state.
    late = await post(client, ws, "governance_review/governance/oversight_request/reject", {"id": held[0]},
                      label="other-agent")
    assert late.status_code == 403 and late.json()["error"] == "governed_credential", late.text


async def test_an_oauth_clients_governed_token_cannot_untie_its_client_on_rest_or_mcp(
        app: object, client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
    token, client_id = tokens["access_token"], tokens["client"]["client_id"]
    persona = await ok(client, ws, f"{PERSONA}/create", GATED)
    await ok(client, ws, f"{PERSONA}/attach", {"client_id": client_id, "persona_id": persona["id"]})
    untie = {"app": "governance", "entity": "persona", "operation": "attach",
             "arguments": {"client_id": client_id, "persona_id": None}}
    rest = await client.post("/api/mcp/tools/prism_config_manage/", json=untie, headers={"Host": ws.host,
                                                                                          **bearer(token)})
    assert rest.status_code == 403 and rest.json()["error"] == "governed_credential", rest.text
    headers = {"Host": ws.host, **bearer(token), "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    init = await client.post("/api/mcp/sse", headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    answer = await client.post("/api/mcp/sse", headers={**headers, "Mcp-Session-Id": init.headers["mcp-session-id"]},
                               json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                     "params": {"name": "prism_config_manage", "arguments": untie}})
    result = answer.json()["result"]
    assert result["isError"] is True and '"governed_credential"' in result["content"][0]["text"], result
    # Still tied: the token's vendor creation is still held for a person.
    held = await client.post("/prism/entity_crud/finance/vendor/create", json={"name": "Acme"},
                             headers={"Host": ws.host, **bearer(token)})
    assert held.status_code == 202, held.text
