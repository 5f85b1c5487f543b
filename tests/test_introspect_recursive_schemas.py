"""An upstream MCP tool whose input schema refers to itself through anyOf/allOf (legal JSON Schema; a
`$defs` entry that is a union including itself) must not break capability search or introspection. The recipe
builder (`registry/introspect.py` `_example`) follows `$ref` then anyOf/oneOf/allOf without counting depth, so it
recurses until RecursionError: every capability search that ranks the tool, and its schema, answer 500."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import post
from tests.integrations_mcp_upstream import (
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    upstream_tls_fixture,
)

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

SELF_REFERRING = {
    "type": "object",
    "properties": {"flt": {"$ref": "#/$defs/Filter"}},
    "required": ["flt"],
    # A filter is another filter or a plain text: valid JSON Schema (the recursion ends at the string variant).
    "$defs": {"Filter": {"anyOf": [{"$ref": "#/$defs/Filter"}, {"type": "string"}]}},
}


async def test_a_self_referring_upstream_schema_breaks_neither_search_nor_introspection(
        client: httpx.AsyncClient, factory: Factory, scripted: ScriptedMcp) -> None:
    ws = await factory.workspace(roles=("owner",))
    scripted.tools = [{"name": "weigh_okapi", "description": "Weigh an okapi by filter.",
                       "inputSchema": SELF_REFERRING}]
    name = "mcp_" + uuid.uuid4().hex[:8]
    added = await post(client, ws, "config_manage/integrations/integration/addMcp",
                       {"name": name, "url": scripted.url, "transport": "streamable_http"})
    assert added.status_code == 200, added.text[:300]

    answers: dict[str, httpx.Response] = {
        "capability_search": await client.get("/api/v1/dev/introspect/", params={
            "dimension": "capability_search", "query": "weigh an okapi", "limit": 5}, headers=ws.headers()),
        "prism_search": await post(client, ws, "report_query/core/registry/search", {"query": "weigh an okapi"}),
        "schema": await client.get("/api/v1/dev/introspect/", params={
            "dimension": "schema", "operation": f"integration_call/{name}/tool/weighOkapi"}, headers=ws.headers()),
    }
    statuses: dict[str, Any] = {door: r.status_code for door, r in answers.items()}
    assert statuses == {"capability_search": 200, "prism_search": 200, "schema": 200}, \
        {door: r.text[:200] for door, r in answers.items()}
    coordinate = f"integration_call/{name}/tool/weighOkapi"
    found = answers["capability_search"].json()["results"]
    assert coordinate in [r["coordinate"] for r in found]
    # The recipe still names the argument to fill, whatever the schema's recursion.
    recipe = next(r["recipe"] for r in found if r["coordinate"] == coordinate)
    assert "flt" in recipe["http"]["body"]["arguments"]
