"""The semantic pass of capability_search's rerank (WordLlama embeddings), on the real app: it finds handlers
asked for in words no handler uses, it stays within what the key may call, it says which ranker ran, and
rerank falls back to the lexical pass when the semantic extra is unavailable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from prism.registry import semantic
from prism.registry.registry import build_registry
from prism.registry.search import terms
from prism.storage import Database
from tests.factories import Factory, Workspace

URL = "/api/v1/dev/introspect/"
LEXICAL, SEMANTIC = "bm25+lexical-rerank", "bm25+semantic-rerank"

# Requests in words that name no handler (checked below), and the handler each one means. The semantic rerank
# ranks it higher than the lexical rerank does, and among the first ten. The lexical pass keeps closing the gap
# (example requests, the thesaurus, a length-neutral first pass): "flakiness and slowness of the partner's API"
# and "we disagree with the amount on this supplier bill, push back on it", once held here, it now ranks as well
# as the embedding does. These two, from the blind tuning tasks, it still ranks lower (second) or not at all.
UNSEEN = {
    "oven 2 temp over the last 30 days - min/max/avg": "report_query/maintenance/meter_reading/trend",
    "What's our total payables balance as of today?": "report_query/finance/invoice/agingApSummary",
}

pytestmark = pytest.mark.skipif(not semantic.AVAILABLE, reason="the semantic extra is not installed")


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    factory = Factory(db)
    workspace = await factory.workspace()
    await factory.add_key(workspace, "ro", scopes="mcp:read")
    return workspace


async def search(client: httpx.AsyncClient, ws: Workspace, query: str, label: str = "owner",
                 **params: Any) -> dict[str, Any]:
    r = await client.get(URL, params={"dimension": "capability_search", "query": query, "rerank": "true",
                                      "limit": 10, **params}, headers=ws.headers(label))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def coordinates(body: dict[str, Any]) -> list[str]:
    return [res["coordinate"] for res in body["results"]]


def test_the_queries_use_no_handler_word() -> None:
    names = {t for h in build_registry() for part in h.path.split("/") for t in terms(part)}
    for query in UNSEEN:
        assert not set(terms(query)) & names, query


async def test_semantic_rerank_finds_what_the_lexical_rerank_misses(client: httpx.AsyncClient, ws: Workspace,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    semantic_ranks = {}
    for query, expected in UNSEEN.items():
        body = await search(client, ws, query)
        assert body["ranker"] == SEMANTIC and body["rerank"] is True
        assert expected in coordinates(body), (query, coordinates(body))
        semantic_ranks[query] = coordinates(body).index(expected)
        scores = [res["score"] for res in body["results"]]
        assert scores == sorted(scores, reverse=True)
    monkeypatch.setattr(semantic, "AVAILABLE", False)  # the module's own switch, as without the package
    for query, expected in UNSEEN.items():
        body = await search(client, ws, query)
        assert body["ranker"] == LEXICAL
        found = coordinates(body)
        lexical_rank = found.index(expected) if expected in found else len(found)
        assert semantic_ranks[query] < lexical_rank, (query, found)


async def test_ranker_names_the_pass_that_ran(client: httpx.AsyncClient, ws: Workspace,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    first = await search(client, ws, "overdue payables aging", rerank="false")
    assert first["ranker"] == "bm25" and first["rerank"] is False
    hybrid = await search(client, ws, "overdue payables aging")
    assert hybrid["ranker"] == SEMANTIC
    assert hybrid["results"][0]["coordinate"] == "report_query/finance/invoice/agingApSummary"
    monkeypatch.setattr(semantic, "AVAILABLE", False)
    fallback = await search(client, ws, "overdue payables aging")
    assert fallback["ranker"] == LEXICAL
    assert fallback["results"][0]["coordinate"] == "report_query/finance/invoice/agingApSummary"
    # Nothing but stop words: nothing to look for, with either ranker.
    assert (await search(client, ws, "the of and"))["results"] == []
    monkeypatch.setattr(semantic, "AVAILABLE", True)
    assert (await search(client, ws, "the of and"))["results"] == []


@pytest.mark.parametrize("label", ["ro", "viewer"])
async def test_semantic_candidates_stay_within_what_the_key_may_call(client: httpx.AsyncClient, ws: Workspace,
                                                                     label: str) -> None:
    ops = await client.get(URL, params={"dimension": "operations"}, headers=ws.headers(label))
    callable_here = {o["coordinate"] for o in ops.json()["operations"]}
    assert callable_here and not ops.json()["truncated"]
    # The nearest handlers of these requests change records: the owner is offered them, this key is not.
    for query in ("a reusable message layout with blanks", "throw out the duplicate bill from that supplier",
                  "get rid of a spare part for good"):
        owner = await search(client, ws, query, limit=20)
        assert {res["required_scope"] for res in owner["results"]} & {"mcp:write", "mcp:execute"}, query
        body = await search(client, ws, query, label, limit=20)
        assert body["ranker"] == SEMANTIC
        assert body["results"], query
        assert set(coordinates(body)) <= callable_here, query
        if label == "ro":
            assert all(res["required_scope"] == "mcp:read" for res in body["results"]), query
    assert "entity_crud/notifications/template/create" not in coordinates(
        await search(client, ws, "a reusable message layout with blanks", label, limit=100))


async def test_narrowing_applies_to_semantic_candidates(client: httpx.AsyncClient, ws: Workspace) -> None:
    body = await search(client, ws, "a reusable message layout with blanks", mega_tool="report_query", limit=20)
    assert body["results"] and {res["parts"]["mega_tool"] for res in body["results"]} == {"report_query"}
    body = await search(client, ws, "how flaky and how slow is the partner's API", app="integrations", limit=20)
    assert "report_query/integrations/endpoint/health" in coordinates(body)[:5]
    assert {res["parts"]["app"] for res in body["results"]} == {"integrations"}


def test_embeddings_are_wordllamas_own() -> None:
    """Reading the wheel's files directly pools exactly as WordLlama.load().embed does, offline."""
    import wordllama

    model = semantic.load_model()
    assert model is not None
    # The package looks for its tokenizer in a folder its wheel does not have and would download it; pointed
    # at its own folder as the cache, with downloads off, it loads offline.
    reference = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    # Words recur within and across texts: each is tokenized once per embedding (Model.embed).
    texts = ["record a vendor invoice", "the forklift is broken, take it out of use", "",
             "the vendor's forklift invoice: invoice, invoice"]
    ours = model.embed(texts)
    theirs = reference.embed(texts)
    assert ours.shape == (4, 256)
    assert np.allclose(ours[[0, 1, 3]], theirs[[0, 1, 3]], atol=1e-5)
    assert not ours[2].any()  # no tokens, no direction


async def test_the_first_semantic_rerank_embeds_on_a_worker_thread_after_the_call_is_committed(
        client: httpx.AsyncClient, ws: Workspace, app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedding every handler takes about a second at 10,000 of them: not on the event loop, and not inside
    the ledger's transaction (SQLite's one writer). Refusals still come from the audited call itself."""
    import threading

    from prism.registry.search import index_for

    index = index_for(app.state.registry)
    built_on: list[str] = []
    real_build = semantic.build

    def recording_build(*args: Any) -> Any:
        built_on.append(threading.current_thread().name)
        return real_build(*args)

    monkeypatch.setattr(semantic, "build", recording_build)
    monkeypatch.setattr(index, "_embedded", None)
    refused = await client.get(URL, params={"dimension": "capability_search", "rerank": "true"},
                               headers=ws.headers("owner"))
    assert refused.status_code == 400 and built_on == []  # no query: refused before anything is embedded
    body = await search(client, ws, next(iter(UNSEEN)))
    assert body["ranker"] == SEMANTIC and coordinates(body)[:5].count(UNSEEN[next(iter(UNSEEN))]) == 1
    assert len(built_on) == 1 and built_on[0] != threading.main_thread().name
    again = await search(client, ws, next(iter(UNSEEN)))
    assert again == body and len(built_on) == 1
