"""What a persona (and a mission's budget) is made of is checked where it is written, on every door: a pattern that
can never match a handler (capitals where names are lower case, an unknown mega-tool) is refused naming it, instead
of being kept to silently match nothing; `true` is not the number 1; a name is not padded with white space."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from prism.keys.service import lookup_of
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.processes import run_cli
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text

PERSONA = "config_manage/governance/persona"
NEVER_MATCH = ["integration_call/GitHub/*/delete*", "entity_crud/finance/Invoice/*", "entity_curd/*/*/*",
               "*/*/*/2fa"]


def _invalid(response: httpx.Response, *named: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "invalid_arguments", body
    for text in named:
        assert text in body["message"], body


@pytest.mark.parametrize("pattern", NEVER_MATCH)
async def test_a_pattern_that_can_never_match_is_refused_naming_it(client: httpx.AsyncClient, factory: Factory,
                                                                    pattern: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    _invalid(await post(client, ws, f"{PERSONA}/create", {"name": "p", "deny": [pattern]}), "deny", pattern)
    made = await ok(client, ws, f"{PERSONA}/create", {"name": "p", "deny": ["*/*/*/delete"]})
    for field in ("allow", "deny", "oversight"):
        _invalid(await post(client, ws, f"{PERSONA}/update", {"id": made["id"], field: [pattern]}), field, pattern)
    kept = await ok(client, ws, f"{PERSONA}/read", {"id": made["id"]})
    assert (kept["deny"], kept["allow"], kept["version"]) == (["*/*/*/delete"], [], 1)


async def test_the_capitals_of_an_operation_name_are_kept_and_match(client: httpx.AsyncClient,
                                                                    factory: Factory) -> None:
    """Operation names are lowerCamelCase (`agingApSummary`): a pattern naming one as written is accepted and
    matches it."""
    ws = await factory.workspace(roles=("owner",))
    made = await ok(client, ws, f"{PERSONA}/create", {"name": "p", "default": "allow",
                                                      "deny": ["report_query/finance/invoice/agingAp*"]})
    await factory.add_key(ws, "agent")
    await ok(client, ws, f"{PERSONA}/attach", {"key": lookup_of(ws.keys["agent"]), "persona_id": made["id"]})
    denied = await post(client, ws, "report_query/finance/invoice/agingApSummary", {}, label="agent")
    assert denied.status_code == 403 and denied.json()["error"] == "blocked", denied.text


@pytest.mark.parametrize(("path", "arguments", "field"), [
    (f"{PERSONA}/create", {"name": "p", "cost_cap": True}, "cost_cap"),
    (f"{PERSONA}/create", {"name": "p", "oversight_sla_seconds": True}, "oversight_sla_seconds"),
    ("mission_control/missions/mission/create", {"name": "m", "budget_ceiling": True}, "budget_ceiling"),
    ("mission_control/missions/mission/create", {"name": "m", "budget_ceiling": False}, "budget_ceiling"),
    (f"{PERSONA}/create", {"name": "p "}, "name"),
    (f"{PERSONA}/create", {"name": " p"}, "name"),
])
async def test_a_boolean_for_a_number_and_a_padded_name_are_refused(
        client: httpx.AsyncClient, factory: Factory, path: str, arguments: dict[str, Any], field: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    _invalid(await post(client, ws, path, arguments), field)


async def test_an_update_is_refused_a_boolean_cap_and_a_padded_name(client: httpx.AsyncClient,
                                                                    factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await ok(client, ws, f"{PERSONA}/create", {"name": "p", "cost_cap": 5})
    for change, field in (({"cost_cap": True}, "cost_cap"), ({"oversight_sla_seconds": True}, "oversight_sla_seconds"),
                          ({"name": "p\t"}, "name"), ({"name": "other "}, "name")):
        _invalid(await post(client, ws, f"{PERSONA}/update", {"id": made["id"], **change}), field)
    kept = await ok(client, ws, f"{PERSONA}/read", {"id": made["id"]})
    assert (kept["name"], kept["cost_cap"], kept["version"]) == ("p", 5, 1)


async def _mcp_create(client: httpx.AsyncClient, ws: Workspace, arguments: dict[str, Any]) -> dict[str, Any]:
    headers = headers_for(ws)
    session = await initialize(client, headers)
    answer = await call(client, headers, session, rpc("tools/call", {"name": "prism_config_manage", "arguments": {
        "app": "governance", "entity": "persona", "operation": "create", "arguments": arguments}}))
    is_error, body = tool_text(answer)
    assert is_error, body
    return body


async def test_the_mcp_door_refuses_them_alike(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for arguments, named in (({"name": "p", "allow": [NEVER_MATCH[0]]}, NEVER_MATCH[0]),
                             ({"name": "p", "cost_cap": True}, "cost_cap"), ({"name": "p "}, "name")):
        body = await _mcp_create(client, ws, arguments)
        assert body["error"] == "invalid_arguments" and named in body["message"], body
    assert (await ok(client, ws, f"{PERSONA}/list", {}))["total"] == 0


async def test_the_cli_refuses_them_alike(factory: Factory, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    sub = ws.tenant.subdomain
    for args, named in ((["create", "p", "--deny", NEVER_MATCH[0]], NEVER_MATCH[0]), (["create", "p "], "name"),
                        (["create", "p", "--oversight", NEVER_MATCH[2]], NEVER_MATCH[2])):
        refused = run_cli("persona", *args, "--tenant", sub, "--json", database_url=database_url)
        error = json.loads(refused.stderr)
        assert refused.returncode == 1 and error["error"] == "invalid_arguments", refused
        assert named in error["message"], error
    made = run_cli("persona", "create", "p", "--tenant", sub, "--json", database_url=database_url)
    assert made.returncode == 0, made
    changed = run_cli("persona", "update", "p", "--tenant", sub, "--allow", NEVER_MATCH[1], "--json",
                      database_url=database_url)
    assert changed.returncode == 1 and NEVER_MATCH[1] in json.loads(changed.stderr)["message"], changed
