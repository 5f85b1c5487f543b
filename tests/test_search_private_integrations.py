"""Another organization's imported integration must not exist for a caller, capability search
included (docs/integrations.md "Each organization enables what it uses": "For every other organization they do
not exist"). A caller's search answer must therefore be the same whether or not some other tenant imported an
integration that speaks of the words it searches for."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import ok

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

WORDS = "zorblax frobnicator quuxify"


def spec(name: str) -> str:
    return json.dumps({
        "openapi": "3.0.3",
        "info": {"title": f"{name} service", "version": "1"},
        "servers": [{"url": "https://upstream.example.com"}],
        "paths": {"/frobnicators": {"get": {
            "operationId": "listFrobnicators",
            "summary": "List zorblax frobnicators to quuxify",
            "description": "Every zorblax frobnicator waiting to quuxify.",
            "responses": {"200": {"description": "ok"}}}}},
    })


async def search(client: httpx.AsyncClient, ws: Any, query: str) -> dict[str, Any]:
    answer: dict[str, Any] = await ok(client, ws, "report_query/core/registry/introspect",
                                      {"dimension": "capability_search", "query": query, "rerank": False})
    return answer


async def test_capability_search_of_one_tenant_does_not_depend_on_another_tenants_imports(
        client: httpx.AsyncClient, factory: Factory) -> None:
    importer = await factory.workspace(roles=("owner",))
    bystander = await factory.workspace(roles=("owner",))
    query = f"list the {WORDS} records"
    before = await search(client, bystander, query)

    name = "zx_" + uuid.uuid4().hex[:10]
    await ok(client, importer, "config_manage/integrations/integration/importOpenapi",
             {"name": name, "spec": spec(name)})
    # The importer has not even connected: nobody may call these handlers, and for the bystander they do not exist.
    after = await search(client, bystander, query)

    assert name not in json.dumps(after)
    # The bystander's answer (ranking, confidences, no_match) is what it was: nothing tells it that some other
    # tenant's integration speaks of these words.
    def shown(answer: dict[str, Any]) -> Any:
        return answer["no_match"], [(r["coordinate"], r["confidence"], r["score"]) for r in answer["results"]]

    assert shown(after) == shown(before)
    assert after == before


async def test_an_organization_finds_its_own_integration_in_words_only_it_uses(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """Left out of the index's statistics, an organization's own operations are still found by it, and their
    words are known to it (not a request about something else)."""
    importer = await factory.workspace(roles=("owner",))
    name = "zx_" + uuid.uuid4().hex[:10]
    await ok(client, importer, "config_manage/integrations/integration/importOpenapi",
             {"name": name, "spec": spec(name)})
    await ok(client, importer, "config_manage/integrations/connection/set",
             {"name": name, "base_url": "https://93.184.215.14"})
    found = await search(client, importer, f"list the {WORDS}")
    assert found["no_match"] is False, found
    assert found["results"][0]["coordinate"] == f"integration_call/{name}/frobnicators/listFrobnicators", found
