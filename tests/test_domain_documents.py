"""documents: upload and import emit document.uploaded, processing really extracts and chunks text and emits
document.processed, knowledge queries rank the caller's own chunks with BM25."""

from __future__ import annotations

import httpx

from prism.apps.documents.text import chunk_text, extract_text
from prism.storage import Database
from tests.domain_support import Caller, events
from tests.factories import Factory

PUMP_MANUAL = """<html><head><title>Pump manual</title><style>p { color: red }</style></head><body>
<h1>Centrifugal pump P-100</h1>
<p>Before starting the pump, prime the casing with water. Never run the pump dry: the mechanical seal
overheats within seconds.</p>
<p>Replace the mechanical seal every 8000 operating hours or when leakage exceeds ten drops per minute.</p>
<script>trackVisitor()</script></body></html>"""
TRAVEL_POLICY = """# Travel policy

Employees book **economy class** for flights under six hours. Hotel costs are reimbursed up to the city
limit. Submit receipts within thirty days of return."""


def test_extraction_drops_markup_scripts_and_markdown_syntax() -> None:
    text = extract_text(PUMP_MANUAL, "text/html")
    assert "trackVisitor" not in text and "color" not in text and "<p>" not in text
    assert "prime the casing with water" in text and "Centrifugal pump P-100" in text
    md = extract_text(TRAVEL_POLICY, "text/markdown")
    assert md.startswith("Travel policy") and "**" not in md and "economy class" in md
    assert extract_text('{"name": "Pump", "specs": {"rpm": 2900}}', "application/json") == "name: Pump\nrpm: 2900"


def test_chunks_overlap_and_cover_every_word() -> None:
    text = " ".join(f"word{i}." if i % 10 == 9 else f"word{i}" for i in range(500))
    chunks = chunk_text(text, size=100, overlap=20)
    assert len(chunks) > 5 and all(len(c.split()) <= 100 for c in chunks)
    seen = {w.strip(".") for c in chunks for w in c.split()}
    assert seen == {f"word{i}" for i in range(500)}
    assert chunks[1].split()[0].strip(".") in {w.strip(".") for w in chunks[0].split()}  # overlap


async def test_upload_and_processing_emit_their_events_and_store_chunks(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    collection = await c.create("documents", "collection", {"name": "Plant manuals"})
    doc = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Pump manual", "content": PUMP_MANUAL, "content_type": "text/html",
        "collection_id": collection["id"], "chunk_words": 20, "overlap_words": 5})
    assert doc["status"] == "processed" and doc["chunk_count"] >= 2 and "content" not in doc
    [uploaded] = await events(db, ws.org.id, "document.uploaded")
    assert uploaded["data"] == {
        "document_id": doc["id"], "title": "Pump manual", "content_type": "text/html", "source": "upload",
        "source_uri": None, "size_bytes": len(PUMP_MANUAL.encode()), "sha256": doc["sha256"],
        "collection_id": collection["id"], "status": "uploaded"}
    [processed] = await events(db, ws.org.id, "document.processed")
    assert processed["data"] == {
        "document_id": doc["id"], "title": "Pump manual", "status": "processed", "collection_id": collection["id"],
        "chunk_count": doc["chunk_count"], "word_count": doc["word_count"], "error": None,
        "processed_at": doc["processed_at"]}
    chunks = await c.ok("entity_crud", "documents", "chunk", "list", {"document_id": doc["id"], "page_size": 100})
    assert chunks["total"] == doc["chunk_count"]
    assert all("<" not in ch["text"] and "trackVisitor" not in ch["text"] for ch in chunks["items"])
    # Processing again with other sizes replaces the chunks.
    again = await c.ok("document_op", "documents", "document", "process", {"id": doc["id"], "chunk_words": 200})
    assert again["chunk_count"] == 1
    assert len(await events(db, ws.org.id, "document.processed")) == 2
    await c.refused(400, "invalid_arguments", "document_op", "documents", "document", "process",
                    {"id": doc["id"], "chunk_words": 20, "overlap_words": 20})
    broken = await c.ok("document_op", "documents", "document", "import", {
        "title": "Bad export", "content": "{not json", "content_type": "application/json",
        "source_uri": "erp://exports/1"})
    assert broken["status"] == "failed" and "JSON" in broken["error"] and broken["source"] == "import"


async def test_knowledge_search_ranks_the_passage_that_answers_and_skips_archived_documents(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    pump = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Pump manual", "content": PUMP_MANUAL, "content_type": "text/html", "chunk_words": 25,
        "overlap_words": 5})
    travel = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Travel policy", "content": TRAVEL_POLICY, "content_type": "text/markdown"})
    hits = await c.ok("knowledge_query", "documents", "chunk", "search",
                      {"query": "how often should the mechanical seal be replaced", "top_k": 3})
    best = hits["results"][0]
    assert best["document_id"] == pump["id"] and "8000 operating hours" in best["text"]
    assert best["document_title"] == "Pump manual" and "seal" in best["matched_terms"]
    assert [r["score"] for r in hits["results"]] == sorted((r["score"] for r in hits["results"]), reverse=True)
    docs = await c.ok("knowledge_query", "documents", "document", "search", {"query": "hotel receipts flights"})
    assert [r["document_id"] for r in docs["results"]] == [travel["id"]]
    context = await c.ok("knowledge_query", "documents", "chunk", "context", {"id": best["chunk_id"], "window": 1})
    assert best["chunk_id"] in [x["chunk_id"] for x in context["chunks"]] and len(context["chunks"]) >= 2
    await c.ok("document_op", "documents", "document", "archive", {"id": pump["id"]})
    hits = await c.ok("knowledge_query", "documents", "chunk", "search", {"query": "mechanical seal"})
    assert hits["results"] == []
    await c.refused(409, "invalid_transition", "document_op", "documents", "document", "process", {"id": pump["id"]})
    await c.ok("document_op", "documents", "document", "restore", {"id": pump["id"]})
    await c.ok("document_op", "documents", "document", "process", {"id": pump["id"]})
    hits = await c.ok("knowledge_query", "documents", "chunk", "search", {"query": "mechanical seal"})
    assert hits["results"][0]["document_id"] == pump["id"]


async def test_knowledge_search_never_sees_another_organizations_documents(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs = Caller(client, (await factory.workspace(roles=("owner",))))
    secret = await theirs.ok("document_op", "documents", "document", "upload", {
        "title": "Merger plan", "content": "Confidential: acquire Globex for forty million in March."})
    await mine.ok("document_op", "documents", "document", "upload",
                  {"title": "Canteen", "content": "Lunch is at noon."})
    for query in ("acquire Globex", "confidential merger forty million"):
        assert (await mine.ok("knowledge_query", "documents", "chunk", "search", {"query": query}))["results"] == []
        assert (await mine.ok("knowledge_query", "documents", "document", "search", {"query": query}))["results"] == []
    scoped = await mine.ok("knowledge_query", "documents", "chunk", "search",
                           {"query": "Globex", "document_ids": [secret["id"]]})
    assert scoped["results"] == []
    await mine.refused(404, "not_found", "document_op", "documents", "document", "process", {"id": secret["id"]})
    await mine.refused(404, "not_found", "entity_crud", "documents", "document", "read", {"id": secret["id"]})
    their_chunk = (await theirs.ok("entity_crud", "documents", "chunk", "list", {}))["items"][0]
    await mine.refused(404, "not_found", "knowledge_query", "documents", "chunk", "context", {"id": their_chunk["id"]})


async def test_similar_documents_are_found_by_their_characteristic_terms(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    pump = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Pump manual", "content": PUMP_MANUAL, "content_type": "text/html"})
    seal_note = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Seal failure report", "content": "The mechanical seal of the pump leaked after 9000 operating "
                                                   "hours; the seal was replaced and the casing primed."})
    await c.ok("document_op", "documents", "document", "upload", {
        "title": "Travel policy", "content": TRAVEL_POLICY, "content_type": "text/markdown"})
    similar = await c.ok("knowledge_query", "documents", "document", "similar", {"id": pump["id"]})
    assert similar["results"][0]["document_id"] == seal_note["id"] and "seal" in similar["terms"]
    assert pump["id"] not in [r["document_id"] for r in similar["results"]]
