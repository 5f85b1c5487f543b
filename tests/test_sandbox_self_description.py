"""The sandbox's me/ and introspect/ answer any valid key whatever its scopes (a key may always learn who it is
and what it may call); introspection lists only what the key may call; the tools behind them, called as tools,
keep asking for mcp:read; personas and the audit ledger still apply."""

from __future__ import annotations

import httpx
import pytest

from prism.registry.mega_tools import SCOPE_OF_CLASS
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import entries, governed_key

SCOPES = ("mcp:read", "mcp:write", "mcp:execute")
SCOPE_CLASS = {scope: cls for cls, scope in SCOPE_OF_CLASS.items()}


async def _single_scope_workspace(factory: Factory) -> Workspace:
    ws = await factory.workspace(roles=("owner",))
    for scope in SCOPES:
        await factory.add_key(ws, scope, scopes=scope)
    return ws


@pytest.mark.parametrize("scope", SCOPES)
async def test_me_answers_a_key_of_any_single_scope(client: httpx.AsyncClient, factory: Factory, db: Database,
                                                    scope: str) -> None:
    ws = await _single_scope_workspace(factory)
    me = await client.get("/api/v1/dev/me/", headers=ws.headers(scope))
    assert me.status_code == 200, me.text
    assert me.json()["key"]["scopes"] == [scope]
    last = (await entries(db, ws.org.id))[-1]  # still a dispatched, audited call
    assert (last.door, last.tool_name, last.outcome) == ("sandbox", "prism_whoami", "allowed")


@pytest.mark.parametrize("scope", SCOPES)
async def test_introspect_answers_any_single_scope_with_only_what_the_key_may_call(
        client: httpx.AsyncClient, factory: Factory, scope: str) -> None:
    ws = await _single_scope_workspace(factory)
    listed = await client.get("/api/v1/dev/introspect/?dimension=handlers&page_size=100",
                              headers=ws.headers(scope))
    assert listed.status_code == 200, listed.text
    assert {item["scope"] for item in listed.json()["items"]} == {SCOPE_CLASS[scope]}
    stats = await client.post("/api/v1/dev/introspect/", json={"dimension": "stats"}, headers=ws.headers(scope))
    assert stats.status_code == 200, stats.text
    by_scope = stats.json()["by_scope"]
    assert by_scope[SCOPE_CLASS[scope]] > 0
    assert all(count == 0 for cls, count in by_scope.items() if cls != SCOPE_CLASS[scope]), by_scope
    tools = await client.get("/api/v1/dev/tools/", headers=ws.headers(scope))
    assert tools.status_code == 200, tools.text


@pytest.mark.parametrize("scope", ["mcp:write", "mcp:execute"])
async def test_whoami_and_introspect_called_as_tools_still_need_mcp_read(client: httpx.AsyncClient,
                                                                          factory: Factory, scope: str) -> None:
    ws = await _single_scope_workspace(factory)
    for tool in ("prism_whoami", "prism_introspect"):
        called = await client.post("/api/v1/dev/call/", json={"name": tool, "arguments": {}},
                                   headers=ws.headers(scope))
        assert called.status_code == 403 and "mcp:read" in called.json()["message"], (tool, called.text)
        canonical = await client.post(f"/api/mcp/tools/{tool}/", json={}, headers=ws.headers(scope))
        assert canonical.status_code == 403 and "mcp:read" in canonical.json()["message"], (tool, canonical.text)


async def test_a_persona_that_denies_whoami_still_refuses_me(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={
        "name": "no-self", "deny": ["report_query/core/caller/*"], "default": "allow"})
    me = await client.get("/api/v1/dev/me/", headers=ws.headers("agent"))
    assert me.status_code == 403 and me.json()["error"] == "blocked", me.text


async def test_a_key_of_one_tenant_describes_nothing_on_another(client: httpx.AsyncClient,
                                                                 factory: Factory) -> None:
    ws, other = await _single_scope_workspace(factory), await factory.workspace(roles=("owner",))
    for path in ("/api/v1/dev/me/", "/api/v1/dev/introspect/"):
        refused = await client.get(path, headers=ws.headers("mcp:execute", host=other.host))
        assert refused.status_code == 401, (path, refused.text)
