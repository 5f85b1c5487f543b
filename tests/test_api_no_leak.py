"""A caller that may not call a handler learns nothing about its parameters: scope and role are checked before
the arguments, on every handler and every door, so a refusal is a bare 403, never a 400 naming fields."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from prism.registry import Registry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.test_mcp_protocol import call, headers_for, initialize, rpc

# An argument no handler has, and a value no parameter takes: a 400 would name it (and list required fields).
PROBE = {"no_such_argument": {"x": 1}}


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    factory = Factory(db)
    ws = await factory.workspace(roles=("viewer",))
    await factory.add_key(ws, "read_only_owner", role="owner", scopes="mcp:read")
    return ws


def assert_bare_refusal(body: dict[str, Any], what: str) -> None:
    assert body["error"] in ("permission_denied", "person_required"), (what, body)  # the latter: a person's
    assert "details" not in body, (what, body)
    assert "no_such_argument" not in body["message"], (what, body)


@pytest.mark.parametrize("label", ["viewer", "read_only_owner"])
async def test_every_handler_refuses_a_caller_without_the_right_before_reading_its_arguments(
        client: httpx.AsyncClient, ws: Workspace, app: Any, label: str) -> None:
    registry: Registry = app.state.registry
    refused = allowed = 0
    for handler in registry:
        r = await client.post(f"/prism/{handler.path}", headers=ws.headers(label), json=PROBE)
        body = r.json()
        if r.status_code == 403:
            assert_bare_refusal(body, handler.path)
            refused += 1
        else:  # a handler this caller may call: its arguments are checked, and named
            assert r.status_code == 400 and body["error"] == "invalid_arguments", (handler.path, r.text)
            assert "no_such_argument" in [p["field"] for p in body["details"]["errors"]], (handler.path, body)
            allowed += 1
    assert refused > 50 and allowed > 20, (refused, allowed)


async def test_a_viewer_learns_nothing_about_a_hidden_handler_through_any_door(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    h = ws.headers("viewer")
    coordinate = {"app": "finance", "entity": "vendor", "operation": "delete"}
    answers = [
        await client.post("/prism/entity_crud/finance/vendor/delete", headers=h, json={}),
        await client.post("/api/mcp/tools/prism_entity_crud/", headers=h, json={**coordinate, "arguments": {}}),
        await client.post("/api/v1/dev/call/", headers=h,
                          json={"name": "prism_entity_crud", "arguments": {**coordinate, "arguments": {}}}),
    ]
    for r in answers:
        assert r.status_code == 403, r.text
        assert_bare_refusal(r.json(), str(r.request.url))
        assert "id" not in r.json()["message"].split()
    headers = headers_for(ws, "viewer")
    session = await initialize(client, headers)
    mcp = await call(client, headers, session, rpc("tools/call", {"name": "prism_entity_crud",
                                                                   "arguments": {**coordinate, "arguments": {}}}))
    result = mcp.json()["result"]
    assert result["isError"] is True
    assert_bare_refusal(json.loads(result["content"][0]["text"]), "mcp")
