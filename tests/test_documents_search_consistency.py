"""Knowledge search reads postings, then chunk rows, in two statements; a write committing in between must not
make it fail or show text its score was not computed from. And documents are ranked on all their chunks."""

from __future__ import annotations

import httpx

from prism.apps.documents.search import Hit, Scope, passages, rank
from prism.storage import Database
from prism.tenancy.scope import acting_for
from tests.domain_support import Caller
from tests.factories import Factory

MANUAL = " ".join(f"Sentence {i} says the mechanical seal of the pump wears." for i in range(40))


async def _ranked(db: Database, organization_id: str, query: str) -> list[Hit]:
    async with db.read() as session:
        with acting_for(session, organization_id):
            return await rank(session, query, Scope(), top_k=10)


async def _passages(db: Database, organization_id: str, hits: list[Hit]) -> list[tuple[Hit, str]]:
    async with db.read() as session:  # a later statement, as under read committed: it sees what committed
        with acting_for(session, organization_id):
            return [(h, c.text) for h, c in await passages(session, hits)]


async def test_a_document_deleted_between_ranking_and_reading_its_chunks_is_left_out(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    gone = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Pump", "content": MANUAL, "chunk_words": 20, "overlap_words": 0})
    kept = await c.ok("document_op", "documents", "document", "upload", {"title": "Note", "content": "Seal leaks."})
    hits = await _ranked(db, ws.org.id, "seal")
    assert {h.document_id for h in hits} == {gone["id"], kept["id"]}
    await c.ok("entity_crud", "documents", "document", "delete", {"id": gone["id"]})
    found = await _passages(db, ws.org.id, hits)
    assert [(h.document_id, text) for h, text in found] == [(kept["id"], "Seal leaks")]


async def test_a_document_processed_again_between_ranking_and_reading_its_chunks_is_left_out(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    doc = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Pump", "content": MANUAL, "chunk_words": 20, "overlap_words": 0})
    hits = await _ranked(db, ws.org.id, "seal")
    assert hits and 0 in {h.seq for h in hits}
    # Chunk 0 now holds the whole text: another chunk than the one its score was computed from.
    await c.ok("document_op", "documents", "document", "process", {"id": doc["id"], "chunk_words": 2000})
    assert await _passages(db, ws.org.id, hits) == []


def _crowd(chunks: int) -> str:
    """`chunks` chunks of 20 words, each nothing but `pump`: every one outscores a passage that says it once."""
    return "\n\n".join(" ".join(["pump"] * 20) for _ in range(chunks))


async def test_documents_are_ranked_on_all_their_chunks_however_many_another_has(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    crowd = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Crowd", "content": _crowd(1200), "chunk_words": 20, "overlap_words": 0})
    assert crowd["chunk_count"] == 1200
    once = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Once", "content": "The pump " + " ".join(f"word{i}" for i in range(100))})
    probe = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Probe", "content": "pump pump pump impeller"})
    found = await c.ok("knowledge_query", "documents", "document", "search", {"query": "pump", "top_k": 5})
    assert [(r["document_id"], r["matching_chunks"]) for r in found["results"]] == [
        (crowd["id"], 1200), (probe["id"], 1), (once["id"], 1)]
    similar = await c.ok("knowledge_query", "documents", "document", "similar", {"id": probe["id"]})
    assert [r["document_id"] for r in similar["results"]] == [crowd["id"], once["id"]]
