"""A boolean is `true` or `false`: in a JSON body (the webhooks API's, every handler's arguments) anything else is
400 `invalid_arguments` naming the field, never read as a boolean ("yes", 1, "false" in quotes); in a query string
exactly `true` or `false`."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.factories import Factory, Workspace
from tests.webhooks_fixtures import BASE, create_hook

URL = "https://127.0.0.1:9/hook"
NOT_BOOLEANS = ["yes", "no", "true", "false", "1", 1, 0, [], {}]


def assert_names_the_field(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "invalid_arguments", body
    assert [e["field"] for e in body["details"]["errors"]] == [field], body
    assert body["details"]["errors"][0]["message"].startswith("must be true or false"), body


@pytest.mark.parametrize("value", NOT_BOOLEANS)
async def test_a_webhook_patch_refuses_a_non_boolean_is_active_and_changes_nothing(
        hook_client: httpx.AsyncClient, factory: Factory, value: Any) -> None:
    ws = await factory.workspace()
    hook = await create_hook(hook_client, ws, URL)
    item = f"{BASE}{hook['id']}/"
    start = False if value in ("yes", "true", 1) else True  # what a lax reading would flip it to, it must not
    assert (await hook_client.patch(item, json={"is_active": start}, headers=ws.headers())).status_code == 200
    assert_names_the_field(await hook_client.patch(item, json={"is_active": value}, headers=ws.headers()),
                           "is_active")
    assert (await hook_client.get(item, headers=ws.headers())).json()["is_active"] is start


async def test_a_webhook_patch_takes_true_and_false(hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    item = f"{BASE}{(await create_hook(hook_client, ws, URL))['id']}/"
    for value in (False, True):
        changed = await hook_client.patch(item, json={"is_active": value}, headers=ws.headers())
        assert changed.status_code == 200 and changed.json()["is_active"] is value, changed.text


async def _active_and_inactive(client: httpx.AsyncClient, ws: Workspace) -> tuple[str, str]:
    active = await create_hook(client, ws, URL, name="on")
    inactive = await create_hook(client, ws, URL, name="off")
    await client.patch(f"{BASE}{inactive['id']}/", json={"is_active": False}, headers=ws.headers())
    return active["id"], inactive["id"]


async def test_the_list_query_takes_exactly_true_or_false(hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws, other = await factory.workspace(), await factory.workspace()
    active, inactive = await _active_and_inactive(hook_client, ws)
    await _active_and_inactive(hook_client, other)  # another tenant's webhooks are never listed
    for text, expected in (("true", [active]), ("false", [inactive])):
        listed = await hook_client.get(BASE, params={"is_active": text}, headers=ws.headers())
        assert listed.status_code == 200 and [h["id"] for h in listed.json()["results"]] == expected, listed.text
    for text in ("yes", "no", "1", "0", "True", "FALSE", "on", ""):
        refused = await hook_client.get(BASE, params={"is_active": text}, headers=ws.headers())
        assert_names_the_field(refused, "is_active")


@pytest.mark.parametrize("value", NOT_BOOLEANS)
async def test_a_handler_refuses_a_non_boolean_argument(client: httpx.AsyncClient, factory: Factory,
                                                        value: Any) -> None:
    ws = await factory.workspace()
    body = {"app": "spare_parts", "entity": "spare_part", "operation": "list",
            "arguments": {"below_reorder_level": value}}
    refused = await client.post("/api/mcp/tools/prism_entity_crud/", json=body, headers=ws.headers())
    assert_names_the_field(refused, "below_reorder_level")
    body["arguments"] = {"below_reorder_level": True}
    taken = await client.post("/api/mcp/tools/prism_entity_crud/", json=body, headers=ws.headers())
    assert taken.status_code == 200, taken.text


async def test_introspection_takes_rerank_as_true_or_false(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    search = {"dimension": "capability_search", "query": "low stock spare parts"}
    lexical = await client.get("/api/v1/dev/introspect/", params={**search, "rerank": "false"}, headers=ws.headers())
    assert lexical.status_code == 200 and lexical.json()["ranker"] == "bm25", lexical.text
    assert_names_the_field(await client.get("/api/v1/dev/introspect/", params={**search, "rerank": "no"},
                                            headers=ws.headers()), "rerank")
    assert_names_the_field(await client.post("/api/v1/dev/introspect/", json={**search, "rerank": "false"},
                                             headers=ws.headers()), "rerank")
