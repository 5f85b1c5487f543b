"""A person's own API keys through the dispatcher (config_manage/keys/api_key/...): listed and revoked by their
owner only, minted only from the console, never another organization's or tenant's."""

from __future__ import annotations

import httpx

from tests.factories import Factory
from tests.governance_support import ok, post

BASE = "config_manage/keys/api_key"


async def test_a_key_lists_and_revokes_only_its_owners_keys_and_cannot_mint_one(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    theirs = await factory.workspace(roles=("owner",))
    owner_keys = (await ok(client, ws, f"{BASE}/list", {}))["items"]
    member_keys = (await ok(client, ws, f"{BASE}/list", {}, label="member"))["items"]
    assert [k["prefix"] for k in owner_keys] == [ws.keys["owner"][:15]]
    assert [k["prefix"] for k in member_keys] == [ws.keys["member"][:15]]
    assert "api_key" not in owner_keys[0] and owner_keys[0]["status"] == "active"

    minted = await post(client, ws, f"{BASE}/create", {"scopes": ["mcp:read"]})
    assert minted.status_code == 403 and minted.json()["error"] == "person_required"
    for foreign in (member_keys[0]["id"], (await ok(client, theirs, f"{BASE}/list", {}))["items"][0]["id"]):
        refused = await post(client, ws, f"{BASE}/revoke", {"id": foreign})
        assert refused.status_code == 404 and refused.json()["error"] == "not_found"
    assert (await ok(client, ws, f"{BASE}/list", {}, label="member"))["items"][0]["status"] == "active"

    revoked = await ok(client, ws, f"{BASE}/revoke", {"id": owner_keys[0]["id"]}, label="owner")
    assert revoked["status"] == "revoked"
    gone = await post(client, ws, f"{BASE}/list", {})
    assert gone.status_code == 401
