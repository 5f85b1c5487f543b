"""A person's own API keys through the dispatcher (config_manage/keys/key/...): listed and revoked by their
owner only, minted only from the console, never another organization's or tenant's; the organization's members
and roles (config_manage/organization/...); the console's pages refusing a typed number that is not one."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from prism.identity.service import add_to_organization
from prism.keys.service import create_key
from prism.models import Organization, User
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.oauth_support import browser, field, sign_in

BASE = "config_manage/keys/key"


async def test_a_key_lists_only_its_owners_keys_and_can_neither_mint_nor_revoke_one(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """Minting and revoking are for a person (the console, /keys/, registration): a key that leaked must not mint
    another or revoke its owner's other keys, and it does not see those handlers in any list."""
    ws = await factory.workspace(roles=("owner", "member", "viewer"))
    owner_keys = (await ok(client, ws, f"{BASE}/list", {}))["items"]
    member_keys = (await ok(client, ws, f"{BASE}/list", {}, label="member"))["items"]
    assert [k["prefix"] for k in owner_keys] == [ws.keys["owner"][:15]]
    assert [k["prefix"] for k in member_keys] == [ws.keys["member"][:15]]
    assert "api_key" not in owner_keys[0] and owner_keys[0]["status"] == "active"
    assert owner_keys[0]["tool_surface"] is None  # no MCP tool surface of its own: the deployment's

    for label in ("owner", "viewer"):
        minted = await post(client, ws, f"{BASE}/create", {"scopes": ["mcp:read"]}, label=label)
        assert minted.status_code == 403 and minted.json()["error"] == "person_required", label
    own = await post(client, ws, f"{BASE}/revoke", {"id": owner_keys[0]["id"]})
    assert own.status_code == 403 and own.json()["error"] == "person_required"
    assert (await ok(client, ws, f"{BASE}/list", {}))["items"][0]["status"] == "active"
    described = await ok(client, ws, "report_query/core/registry/introspect", {
        "dimension": "handlers", "mega_tool": "config_manage", "app": "keys", "limit": 100})
    assert [h["coordinate"] for h in described["items"]] == [f"{BASE}/list"]


async def test_members_and_roles_are_those_of_the_callers_organization(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "viewer"))
    sibling = await factory.second_org(ws)
    await factory.add_key(ws, "sibling", org=sibling)
    await factory.workspace(roles=("owner",))  # another tenant, with members of its own
    members = await ok(client, ws, "config_manage/organization/member/list", {}, label="viewer")
    assert {(m["email"], m["role"]) for m in members["items"]} == {(ws.emails["owner"], "owner"),
                                                                    (ws.emails["viewer"], "viewer")}
    searched = await ok(client, ws, "config_manage/organization/member/list", {"search": "viewer"})
    assert [m["email"] for m in searched["items"]] == [ws.emails["viewer"]]
    theirs = await ok(client, ws, "config_manage/organization/member/list", {}, label="sibling")
    assert [m["email"] for m in theirs["items"]] == [ws.emails["sibling"]]
    roles = await ok(client, ws, "config_manage/organization/role/list", {}, label="viewer")
    viewer = {r["name"]: r["permissions"] for r in roles["items"]}["viewer"]
    assert viewer == ["*.view_*", "keys.add_key", "keys.change_key"]


async def test_a_persons_keys_are_paged_ordered_and_searched_by_the_database(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """Six keys of one person, two more of the same person in a second organization, three of a person of
    another tenant: pages are counted, ordered and cut in SQL over the caller's own keys in the caller's
    organization only, and a bad ordering is a 400."""
    ws = await factory.workspace(roles=("owner",))
    sibling = await factory.second_org(ws)
    theirs = await factory.workspace(roles=("owner",))
    for workspace, org, names in ((ws, ws.org, [f"runner-{n}" for n in "bdacf"]),
                                  (ws, sibling, ["runner-s1", "runner-s2"]),
                                  (theirs, theirs.org, ["runner-x", "runner-y", "runner-z"])):
        async with db.write() as s:
            user = (await s.execute(select(User).where(User.email == workspace.emails["owner"]))).scalar_one()
            organization = await s.get(Organization, org.id)
            assert organization is not None
            if organization.id == sibling.id:
                await add_to_organization(s, user, organization, role="owner")
            for name in names:
                # Two keys expire, the others never do: their expiry is NULL.
                expires = {"runner-a": 10, "runner-c": 30}.get(name)
                await create_key(s, tenant=workspace.tenant, user=user, organization=organization, name=name,
                                 expires_days=expires)
    first = await ok(client, ws, f"{BASE}/list", {"page_size": 4})
    second = await ok(client, ws, f"{BASE}/list", {"page": 2, "page_size": 4})
    assert first["total"] == second["total"] == 6 and len(first["items"]) == 4 and len(second["items"]) == 2
    newest_first = [k["created_at"] for k in first["items"] + second["items"]]
    assert newest_first == sorted(newest_first, reverse=True)
    assert not {k["id"] for k in first["items"]} & {k["id"] for k in second["items"]}
    by_name = await ok(client, ws, f"{BASE}/list", {"ordering": "name", "search": "runner"})
    assert [k["name"] for k in by_name["items"]] == [f"runner-{n}" for n in "abcdf"] and by_name["total"] == 5
    by_prefix = await ok(client, ws, f"{BASE}/list", {"search": first["items"][0]["prefix"]})
    assert [k["id"] for k in by_prefix["items"]] == [first["items"][0]["id"]]
    bad = await post(client, ws, f"{BASE}/list", {"ordering": "secret_hash"})
    assert bad.status_code == 400 and "ordering" in bad.json()["message"], bad.json()
    # Keys that never expire come last either way, on PostgreSQL (NULLs sort high) as on SQLite (NULLs sort low).
    soonest = await ok(client, ws, f"{BASE}/list", {"ordering": "expires_at", "search": "runner"})
    latest = await ok(client, ws, f"{BASE}/list", {"ordering": "-expires_at", "search": "runner"})
    assert [k["name"] for k in soonest["items"]][:2] == ["runner-a", "runner-c"]
    assert [k["name"] for k in latest["items"]][:2] == ["runner-c", "runner-a"]
    assert all(k["expires_at"] is None for k in soonest["items"][2:] + latest["items"][2:])


async def test_a_number_typed_in_a_console_form_or_link_that_is_not_ascii_digits_is_a_400_naming_it(
        app: Any, factory: Factory) -> None:
    """"²" passes str.isdigit() and int() refuses it; a number past what the database stores is refused by the
    handler it is for: both are the person's mistake, answered on the page, never a 500."""
    ws = await factory.workspace(roles=("owner",))
    too_large = str(2**63)
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/keys/")).status_code == 303
        org = {"org": ws.org.id}
        token = field((await c.get("/console/keys/", params=org)).text, "csrf_token")
        posted = {
            "expires_days": await c.post("/console/keys/", params=org, data={
                "csrf_token": token, "name": "k", "mcp:read": "on", "expires_days": "²"}),
            "budget_ceiling": await c.post("/console/governance/mission/", params=org, data={
                "csrf_token": token, "name": "m", "budget_ceiling": "²"}),
            "cost_cap": await c.post("/console/governance/persona/", params=org, data={
                "csrf_token": token, "name": "p", "cost_cap": "1²"}),
        }
        got = {
            "page": await c.get("/console/webhooks/any-id/", params={**org, "page": "²"}),
            "ledger page": await c.get("/console/ledger/", params={**org, "page": "²"}),
            "seq_from": await c.get("/console/ledger/", params={**org, "seq_from": "²"}),
            "seq_to": await c.get("/console/ledger/", params={**org, "seq_to": "9" * 30}),
            "export seq_from": await c.get("/console/ledger/export/", params={**org, "seq_from": "²"}),
            "large seq_from": await c.get("/console/ledger/", params={**org, "seq_from": too_large}),
            "large export seq_from": await c.get("/console/ledger/export/", params={**org, "seq_from": too_large}),
        }
        entries = {path: await c.get(path, params=org) for path in (
            "/console/ledger/seq-%C2%B2/", f"/console/ledger/seq-{too_large}/", f"/console/ledger/id-{too_large}/")}
    for name, response in {**posted, **got}.items():
        assert response.status_code == 400, (name, response.status_code, response.text[-500:])
        assert name.split()[-1] in response.text, name
    for path, response in entries.items():
        assert response.status_code == 400, (path, response.status_code, response.text[-500:])


async def test_members_and_roles_are_searched_and_ordered_as_the_other_lists_are(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member", "viewer"))
    members = "config_manage/organization/member/list"
    by_email = sorted(ws.emails[r] for r in ("owner", "member", "viewer"))
    assert [m["email"] for m in (await ok(client, ws, members, {}))["items"]] == by_email
    assert [m["email"] for m in (await ok(client, ws, members, {"ordering": "-email"}))["items"]] == by_email[::-1]
    assert [m["role"] for m in (await ok(client, ws, members, {"ordering": "role"}))["items"]] == [
        "member", "owner", "viewer"]
    roles = "config_manage/organization/role/list"
    assert (await ok(client, ws, roles, {"search": "zzzzqq"}))["items"] == []
    assert [r["name"] for r in (await ok(client, ws, roles, {"search": "VIEW"}))["items"]] == ["viewer"]
    names = [r["name"] for r in (await ok(client, ws, roles, {}))["items"]]
    assert names == sorted(names) and [r["name"] for r in (await ok(client, ws, roles, {"ordering": "-name"}))[
        "items"]] == names[::-1]
    for coordinate in (members, roles):
        r = await client.post(f"/prism/{coordinate}", headers=ws.headers(), json={"ordering": "permissions"})
        assert r.status_code == 400 and r.json()["error"] == "invalid_arguments", r.text
