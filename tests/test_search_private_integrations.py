"""An integration an organization has not enabled must not exist for it, capability search included
(docs/integrations.md "Each organization enables what it uses": "For every other organization they do not exist";
docs/search.md "Whose statistics"). A caller's search answer (order, scores, confidences, no_match, on the first
pass and with the semantic rerank) must therefore be the same whether or not another tenant imported an
integration that speaks of the words it searches for, or connected to a deployment integration it did not."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism.config import Settings
from tests.deployment_imports import imported_for_the_deployment
from tests.factories import Factory, Workspace
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


# Words built-in handlers use (finance's invoices, vendors and payments), said by many imported operations: counted
# in the statistics of an organization that cannot see them, they would move its scores.
SHARED_WORDS_QUERY = "list the vendor invoices awaiting payment approval"


def payables_spec(name: str) -> str:
    paths = {f"/vendors/{{vendorId}}/invoices/{i}": {"get": {
        "operationId": f"listVendorInvoices{i}",
        "summary": f"List vendor invoices awaiting payment approval, batch {i}",
        "description": "Vendor invoices and their payment approval status.",
        "parameters": [{"name": "vendorId", "in": "path", "required": True, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "ok"}}}} for i in range(40)}
    return json.dumps({"openapi": "3.0.3", "info": {"title": f"{name} payables", "version": "1"},
                       "servers": [{"url": "https://payables.example.com"}], "paths": paths})


async def answers(client: httpx.AsyncClient, ws: Workspace) -> list[Any]:
    """What a caller is told for the query: both capability_search rankers and prism_search."""
    said = [await ok(client, ws, "report_query/core/registry/introspect",
                     {"dimension": "capability_search", "query": SHARED_WORDS_QUERY, "rerank": rerank})
            for rerank in (False, True)]
    said.append(await ok(client, ws, "report_query/core/registry/search", {"query": SHARED_WORDS_QUERY}))
    return said


async def test_another_organizations_integration_in_a_built_in_handlers_words_moves_nothing(
        client: httpx.AsyncClient, factory: Factory) -> None:
    importer = await factory.workspace(roles=("owner",))
    bystander = await factory.workspace(roles=("owner",))
    before = await answers(client, bystander)
    assert before[1]["ranker"] == "bm25+semantic-rerank"

    name = "zp_" + uuid.uuid4().hex[:10]
    await ok(client, importer, "config_manage/integrations/integration/importOpenapi",
             {"name": name, "spec": payables_spec(name)})
    assert await answers(client, bystander) == before
    await ok(client, importer, "config_manage/integrations/connection/set",
             {"name": name, "base_url": "https://93.184.215.14"})
    assert await answers(client, bystander) == before
    # The importer, who sees them, ranks with them: its own operations come first.
    assert (await answers(client, importer))[1]["results"][0]["coordinate"].startswith(f"integration_call/{name}/")


async def test_a_deployment_integration_an_organization_did_not_connect_moves_nothing(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, tmp_path: Path) -> None:
    connected = await factory.workspace(roles=("owner",))
    bystander = await factory.workspace(roles=("owner",))
    before = await answers(client, bystander)

    name = "zd_" + uuid.uuid4().hex[:10]
    spec = tmp_path / "payables.json"
    spec.write_text(payables_spec(name))
    await imported_for_the_deployment(client, bystander, settings, spec, name)
    assert await answers(client, bystander) == before
    await ok(client, connected, "config_manage/integrations/connection/set",
             {"name": name, "base_url": "https://93.184.215.14"})
    assert await answers(client, bystander) == before
    assert (await answers(client, connected))[1]["results"][0]["coordinate"].startswith(f"integration_call/{name}/")


async def test_an_organizations_first_semantic_rerank_centres_its_rows_off_the_event_loop(
        client: httpx.AsyncClient, factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus's embedding rows (its handlers' and examples', centred on its mean) take ~50 ms at 10,000 handlers:
    made on the index builder's thread after the call is committed, as the index's own embeddings are."""
    import threading

    from prism.registry import semantic

    importer = await factory.workspace(roles=("owner",))
    bystander = await factory.workspace(roles=("owner",))
    name, unused = "zr_" + uuid.uuid4().hex[:10], "zu_" + uuid.uuid4().hex[:10]
    for imported in (name, unused):  # the one left unconnected keeps the importer's corpus from being everything
        await ok(client, importer, "config_manage/integrations/integration/importOpenapi",
                 {"name": imported, "spec": payables_spec(imported)})
    await ok(client, importer, "config_manage/integrations/connection/set",
             {"name": name, "base_url": "https://93.184.215.14"})
    await answers(client, bystander)  # the registry's handlers are embedded by now
    made_on: list[str] = []
    real = semantic.SemanticIndex

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any) -> None:
            made_on.append(threading.current_thread().name)
            super().__init__(*args)

    monkeypatch.setattr(semantic, "SemanticIndex", Recording)
    first = await answers(client, importer)
    assert len(made_on) == 1 and made_on[0] != threading.main_thread().name, made_on
    assert await answers(client, importer) == first and len(made_on) == 1  # kept
