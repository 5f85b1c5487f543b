"""documents `similar` on a document of many distinct words, each said once (here a 1 MB upload that failed for
having more than 50,000 distinct words; a processed one of 50,000 behaves alike): the lookups of its terms' spread
stopped only when no word left could reach the twelfth weight, never here (every word's best weight equals it),
so it ran one postings query per 500 words (~330), inside the transaction its ledger batch's calls share."""

from __future__ import annotations

import time
from typing import Any

import httpx

from prism.apps.documents import handlers
from tests.domain_support import Caller
from tests.factories import Factory


async def test_similar_on_a_document_of_distinct_words_runs_a_bounded_number_of_queries(
        client: httpx.AsyncClient, factory: Factory, monkeypatch: Any) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    await c.ok("document_op", "documents", "document", "upload", {"title": "other", "content": "pump seal casing"})
    content = " ".join(f"w{i:x}" for i in range(165_000))[:1_000_000]
    doc = await c.ok("document_op", "documents", "document", "upload", {"title": "Varied", "content": content})
    assert doc["status"] == "failed"

    queries: list[int] = []
    spent: list[float] = []
    real = handlers._characteristic_terms

    async def counted(call: Any, *args: Any) -> Any:
        execute = call.session.execute
        count = 0

        async def counting(*a: Any, **k: Any) -> Any:
            nonlocal count
            count += 1
            return await execute(*a, **k)

        call.session.execute = counting
        started = time.perf_counter()
        try:
            return await real(call, *args)
        finally:
            del call.session.execute
            queries.append(count)
            spent.append(time.perf_counter() - started)

    monkeypatch.setattr(handlers, "_characteristic_terms", counted)
    similar = await c.ok("knowledge_query", "documents", "document", "similar", {"id": doc["id"]})
    assert len(similar["terms"]) == 12
    assert queries[0] <= 5, (queries, spent)
