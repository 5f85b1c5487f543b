"""Knowledge search from the inverted index (documents_postings): the same ranking, to the last bit, as BM25
over every chunk's text (tests/documents_reference.py); postings follow every write of the chunks; a query
reads no chunk text but its hits'; another organization's documents never weigh on a score."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from sqlalchemy import delete, event, func, select

from prism.apps.documents.index import TERM_LENGTH, decode, term_key
from prism.apps.documents.models import DocumentChunk, DocumentPosting
from prism.apps.documents.search import Scope, rank
from prism.models import Organization
from prism.storage import Database
from prism.tenancy.scope import acting_for
from tests import documents_reference as reference
from tests.domain_support import Caller
from tests.factories import Factory

LONG = "x" * 70 + "alpha"  # beyond TERM_LENGTH: stored under its hash
LONG_TWIN = "x" * 70 + "omega"  # the same first letters, another word
VOCABULARY = [*("pump seal casing bearing motor valve pressure leak drop hour water grease coupling vibration "
                "alignment flange gasket impeller shaft rotor stator filter the of and to a is 8000 ten "
                "Pompe naïve İstanbul 水泵 straße Straße").split(), LONG, LONG_TWIN]
QUERIES = ("how often should the mechanical seal be replaced", "seal", "seal seal SEAL pump", "the", "the of and",
           "grease bearing motor", "8000 hours", "水泵 pompe", "straße", "istanbul İstanbul", LONG, LONG_TWIN,
           f"{LONG} seal", "nothing matches zzzz", "flange gasket impeller shaft rotor stator filter water",
           "a", "naïve naive")


def _text(rng: random.Random, n_words: int) -> str:
    drawn = rng.choices(VOCABULARY, weights=[1 / (i + 1) for i in range(len(VOCABULARY))], k=n_words)
    return " ".join(w + ("." if rng.random() < 0.1 else "") for w in drawn)


async def _corpus(c: Caller, seed: int) -> dict[str, Any]:
    """Collections, documents of every kind and size, identical passages in several documents (ties)."""
    rng = random.Random(seed)
    manuals = await c.create("documents", "collection", {"name": f"Manuals {seed}"})
    reports = await c.create("documents", "collection", {"name": f"Reports {seed}"})
    docs = []
    for i in range(9):
        collection = (manuals["id"], reports["id"], None)[i % 3]
        size = rng.choice((20, 35, 60, 200))
        docs.append(await c.ok("document_op", "documents", "document", "upload", {
            "title": f"Doc {i}", "content": _text(rng, rng.randint(5, 400)), "collection_id": collection,
            "chunk_words": size, "overlap_words": rng.randint(0, size // 2)}))
    twin = "The pump seal leaks ten drops per hour. Replace the seal."
    for i in range(3):  # the same text: the same scores, ranked by (document id, seq)
        docs.append(await c.ok("document_op", "documents", "document", "upload", {
            "title": f"Twin {i}", "content": twin, "collection_id": manuals["id"]}))
    docs.append(await c.ok("document_op", "documents", "document", "upload", {
        "title": "Markup", "content_type": "text/html", "collection_id": reports["id"],
        "content": "<h1>Pump P-100</h1><p>Grease the <b>motor</b> bearing every 30 days.</p><script>x()</script>"}))
    failed = await c.ok("document_op", "documents", "document", "upload", {
        "title": "Broken", "content": "{not json", "content_type": "application/json"})
    assert failed["status"] == "failed"
    return {"manuals": manuals["id"], "reports": reports["id"], "docs": [d["id"] for d in docs]}


async def _same_ranking(db: Database, organization_id: str, scope: Scope, queries: tuple[str, ...] = QUERIES) -> int:
    """Every query ranks exactly as the reference over the chunks in scope; returns how many hits were compared."""
    compared = 0
    async with db.read() as session:
        chunks = await reference.chunks_in_order(
            session, organization_id, collection_id=scope.collection_id,
            document_ids=None if scope.document_ids is None else list(scope.document_ids),
            excluded=scope.excluded_document_id)
        with acting_for(session, organization_id):
            for query in queries:
                for top_k in (1, 5, 1000):
                    got = [(h.document_id, h.seq, h.score, h.matched)
                           for h in await rank(session, query, scope, top_k=top_k)]
                    assert got == reference.ranked(query, chunks, top_k), (query, scope, top_k)
                    compared += len(got)
    return compared


async def _same_answers(c: Caller, db: Database, corpus: dict[str, Any]) -> None:
    """The handlers' answers, as the reference computes them."""
    org = c.ws.org.id
    for query in QUERIES[:8]:
        async with db.read() as session:
            chunks = await reference.chunks_in_order(session, org, collection_id=corpus["manuals"])
        expected = reference.ranked(query, chunks, 5)
        got = await c.ok("knowledge_query", "documents", "chunk", "search",
                         {"query": query, "collection_id": corpus["manuals"]})
        by_key = {(ch.document_id, ch.seq): ch for ch in chunks}
        assert [(r["document_id"], r["seq"], r["score"], tuple(r["matched_terms"]), r["chunk_id"], r["text"])
                for r in got["results"]] == [
            (d, s, round(score, 6), m, by_key[(d, s)].id, by_key[(d, s)].text) for d, s, score, m in expected]
        documents = await c.ok("knowledge_query", "documents", "document", "search", {"query": query, "top_k": 4})
        async with db.read() as session:
            everything = await reference.chunks_in_order(session, org)
        best: dict[str, Any] = {}
        for d, s, score, _ in reference.ranked(query, everything, 1000):
            best.setdefault(d, [s, score, 0])[2] += 1
        got_documents = [(r["document_id"], r["score"], r["matching_chunks"], r["best_chunk_id"])
                         for r in documents["results"]]
        ids = {(ch.document_id, ch.seq): ch.id for ch in everything}
        assert got_documents == [(d, round(score, 6), n, ids[(d, s)]) for d, (s, score, n) in list(best.items())[:4]]
    for document_id in corpus["docs"][:4]:
        got = await c.ok("knowledge_query", "documents", "document", "similar", {"id": document_id, "top_k": 10})
        async with db.read() as session:
            others = await reference.chunks_in_order(session, org, excluded=document_id)
        document = await c.read("documents", "document", document_id)
        terms, results = reference.similar(document["content"], document["content_type"], document_id, others, 10)
        assert got["terms"] == terms
        assert [(r["document_id"], r["score"]) for r in got["results"]] == [(d, round(s, 6)) for d, s in results]


async def test_the_index_ranks_exactly_as_bm25_over_every_chunks_text(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    corpus = await _corpus(c, seed=11)
    org = c.ws.org.id
    compared = 0
    for scope in (Scope(), Scope(collection_id=corpus["manuals"]), Scope(collection_id=corpus["reports"]),
                  Scope(document_ids=corpus["docs"][::2]), Scope(document_ids=[]),
                  Scope(excluded_document_id=corpus["docs"][0]), Scope(collection_id="no-such-collection")):
        compared += await _same_ranking(db, org, scope)
    assert compared > 500  # the corpus really matched, with ties
    await _same_answers(c, db, corpus)


async def test_postings_follow_the_chunks_through_reprocess_archive_move_and_delete(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    corpus = await _corpus(c, seed=12)
    org, doc = c.ws.org.id, corpus["docs"][1]

    async def consistent() -> None:
        """The postings are exactly those of the chunks' texts, and carry their document's collection."""
        async with db.read() as session:
            chunks = (await session.execute(select(DocumentChunk).where(DocumentChunk.organization_id == org)
                                            .order_by(DocumentChunk.document_id, DocumentChunk.seq))).scalars().all()
            stored = (await session.execute(select(DocumentPosting).where(
                DocumentPosting.organization_id == org))).scalars().all()
        expected: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
        collections = {ch.document_id: ch.collection_id for ch in chunks}
        for ch in chunks:
            tokens = reference.words(ch.text)
            assert ch.token_count == len(tokens)
            for term in dict.fromkeys(tokens):
                expected.setdefault((ch.document_id, term_key(term)), []).append(
                    (ch.seq, tokens.count(term), len(tokens)))
        assert {(p.document_id, p.term): list(decode(p.chunks)) for p in stored} == expected
        assert all(p.collection_id == collections[p.document_id] for p in stored)
        await _same_ranking(db, org, Scope(), QUERIES[:6])
        await _same_ranking(db, org, Scope(collection_id=corpus["manuals"]), QUERIES[:6])

    await consistent()
    await c.ok("document_op", "documents", "document", "process", {"id": doc, "chunk_words": 20, "overlap_words": 3})
    await consistent()
    await c.ok("entity_crud", "documents", "document", "update", {"id": doc, "collection_id": corpus["manuals"]})
    await consistent()
    await c.ok("entity_crud", "documents", "document", "update", {"id": doc, "collection_id": None})
    await consistent()
    await c.ok("document_op", "documents", "document", "archive", {"id": doc})
    await consistent()
    await c.ok("entity_crud", "documents", "document", "delete", {"id": corpus["docs"][2]})
    await consistent()
    async with db.read() as session:
        left = (await session.execute(select(func.count()).select_from(DocumentPosting).where(
            DocumentPosting.document_id.in_([doc, corpus["docs"][2]])))).scalar_one()
    assert left == 0


async def test_a_long_word_is_found_by_itself_only(client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    word = "ü" * 990  # 1,980 bytes: more than PostgreSQL's index entries hold beside the rest; found all the same
    doc = await c.ok("document_op", "documents", "document", "upload", {"title": "Long", "content": f"{word} seal"})
    await c.ok("document_op", "documents", "document", "upload", {"title": "Other", "content": f"{word[:-1]} seal"})
    hits = (await c.ok("knowledge_query", "documents", "chunk", "search", {"query": word}))["results"]
    assert [h["document_id"] for h in hits] == [doc["id"]] and len(term_key(word)) <= 100 < len(word)
    assert len(term_key("a" * TERM_LENGTH)) == TERM_LENGTH


@contextmanager
def _statements(db: Database) -> Iterator[list[str]]:
    seen: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    engines = {db.engine.sync_engine, db.read_engine.sync_engine}
    for engine in engines:
        event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", note)


async def test_a_query_reads_the_text_of_its_hits_only(client: httpx.AsyncClient, factory: Factory,
                                                       db: Database) -> None:
    """The old search read (and tokenised) every chunk of the organization on every query."""
    c = Caller(client, await factory.workspace(roles=("owner",)))
    await _corpus(c, seed=13)
    with _statements(db) as seen:
        got = await c.ok("knowledge_query", "documents", "chunk", "search", {"query": "pump seal", "top_k": 2})
    assert len(got["results"]) == 2
    reads_text = [s for s in seen if re.search(r"documents_chunks\.text\b", s)]
    assert len(reads_text) == 1, reads_text
    assert re.search(r"\(documents_chunks\.document_id, documents_chunks\.seq\) IN", reads_text[0]), reads_text


async def test_another_organizations_documents_never_weigh_on_scores(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    mine = Caller(client, await factory.workspace(roles=("owner",)))
    theirs = Caller(client, await factory.workspace(roles=("owner",)))
    corpus = await _corpus(mine, seed=14)
    queries = ("pump seal", "the of and", "grease bearing motor", LONG)

    async def answers() -> list[Any]:
        return [await mine.ok("knowledge_query", "documents", "chunk", "search", {"query": q, "top_k": 50})
                for q in queries] + [
            await mine.ok("knowledge_query", "documents", "document", "search", {"query": q}) for q in queries] + [
            await mine.ok("knowledge_query", "documents", "document", "similar", {"id": corpus["docs"][0]})]

    with _statements(db) as seen:
        before = await answers()
    index_reads = [s for s in seen if re.search(r"\bFROM documents_(chunks|postings)\b", s)]
    assert index_reads and all("organization_id = " in s for s in index_reads), index_reads  # counts included
    # Their organization: many more chunks, of other lengths, holding the same terms (N, average, df all change).
    rng = random.Random(99)
    theirs_docs = []
    for i in range(6):
        theirs_docs.append((await theirs.ok("document_op", "documents", "document", "upload", {
            "title": f"Theirs {i}", "content": f"{LONG} pump seal the of and grease " + _text(rng, 900),
            "chunk_words": 20, "overlap_words": 0}))["id"])
    assert await answers() == before
    for scope in (Scope(), Scope(document_ids=theirs_docs), Scope(excluded_document_id=corpus["docs"][0])):
        await _same_ranking(db, mine.ws.org.id, scope, queries)
    scoped = await mine.ok("knowledge_query", "documents", "chunk", "search",
                           {"query": "pump seal", "document_ids": theirs_docs})
    assert scoped["results"] == []
    their_hits = await theirs.ok("knowledge_query", "documents", "chunk", "search", {"query": "pump seal", "top_k": 50})
    assert {h["document_id"] for h in their_hits["results"]} <= set(theirs_docs)


async def test_deleting_an_organization_deletes_its_postings_through_its_documents(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """An organization deleted by an operator (its rows go by cascade) leaves no postings behind."""
    c = Caller(client, await factory.workspace(roles=("owner",)))
    await c.ok("document_op", "documents", "document", "upload", {"title": "Pump", "content": "Prime the pump."})

    async def postings() -> int:
        async with db.read() as session:
            return int((await session.execute(select(func.count()).select_from(DocumentPosting).where(
                DocumentPosting.organization_id == c.ws.org.id))).scalar_one())

    assert await postings() == 3
    async with db.write() as session:
        await session.execute(delete(Organization).where(Organization.id == c.ws.org.id))
    assert await postings() == 0
