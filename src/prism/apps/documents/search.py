"""BM25 ranking of document chunks (Okapi BM25, k1 = 1.2, b = 0.75) from the inverted index.

The corpus is the caller's organization's chunks, all of them (optionally narrowed to a collection, to some
documents, or to all documents but one). A query reads two things, both in the caller's transaction and
both limited to the caller's organization: the number of chunks in scope and their total length (one
aggregate over `documents_chunks`), and the postings of its own terms (`documents_postings`, one row per
document holding a term). No chunk text is read or tokenised, so statistics are always current, nothing is
indexed behind the transaction, and another organization's text never weighs on a score.

Scores are the textbook ones and the same, to the last bit, as BM25 computed over every chunk's text in
(document id, seq) order: the same idf, the same average length, the terms added in the query's order,
ties broken by (document id, seq). tests/documents_reference.py keeps that computation, and
tests/test_documents_search_index.py compares the two.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.documents.index import term_key
from prism.apps.documents.models import DocumentChunk, DocumentPosting
from prism.apps.documents.text import words

K1 = 1.2
B = 0.75
# Function words that say nothing about a document's subject (used to pick a document's own terms).
STOPWORDS = frozenset("""a about after all also an and any are as at be been before but by can could do does each
for from had has have how if in into is it its may more most must no not of on or other our out over should so
some such than that the their them then there these they this those through to under up use used was we were
what when where which while who will with within without would you your""".split())


@dataclass(frozen=True, slots=True)
class Scope:
    """Which of the organization's chunks form the corpus (the session adds the organization itself)."""

    collection_id: str | None = None
    document_ids: Collection[str] | None = None
    excluded_document_id: str | None = None

    def narrow(self, stmt: Any, model: type[DocumentChunk] | type[DocumentPosting]) -> Any:
        if self.collection_id is not None:
            stmt = stmt.where(model.collection_id == self.collection_id)
        if self.document_ids is not None:
            stmt = stmt.where(model.document_id.in_(list(self.document_ids)))
        if self.excluded_document_id is not None:
            stmt = stmt.where(model.document_id != self.excluded_document_id)
        return stmt


@dataclass(frozen=True, slots=True)
class Hit:
    document_id: str
    seq: int
    score: float
    matched: tuple[str, ...]
    length: int  # the chunk's number of words, as its postings gave it


@dataclass(frozen=True, slots=True)
class DocumentHit:
    """A document's best chunk and how many of its chunks hold a term of the query."""

    best: Hit
    matching_chunks: int


async def rank(session: AsyncSession, query: str, scope: Scope, *, top_k: int) -> list[Hit]:
    """The `top_k` best chunks for `query`, best first; only chunks holding at least one of its terms."""
    scored = await _scored(session, query, scope)
    return scored.top_chunks(top_k) if scored else []


async def rank_documents(session: AsyncSession, query: str, scope: Scope, *, top_k: int) -> list[DocumentHit]:
    """The `top_k` documents whose best chunk ranks highest for `query`, best first, each judged on all its
    chunks (however many of another document's chunks score higher)."""
    scored = await _scored(session, query, scope)
    return scored.top_documents(top_k) if scored else []


async def passages(session: AsyncSession, hits: list[Hit]) -> list[tuple[Hit, DocumentChunk]]:
    """The hits with their chunk rows, in the hits' order. The chunks are read by a later statement than the
    postings; in between (read committed on PostgreSQL) the document may have been deleted, archived or
    processed again by a transaction that committed meanwhile: a hit whose chunk is gone, or is no longer the
    chunk its postings described (another length, or without the terms it matched), is left out rather than
    shown with text its score was not computed from."""
    if not hits:
        return []
    rows = (await session.execute(select(DocumentChunk).where(tuple_(DocumentChunk.document_id, DocumentChunk.seq)
                                                              .in_([(h.document_id, h.seq) for h in hits])))).scalars()
    chunks = {(c.document_id, c.seq): c for c in rows}
    found = [(h, chunks.get((h.document_id, h.seq))) for h in hits]
    return [(h, c) for h, c in found if c is not None and _described_by(h, c)]


def _described_by(hit: Hit, chunk: DocumentChunk) -> bool:
    if chunk.token_count != hit.length:
        return False
    tokens = set(words(chunk.text))
    return all(term in tokens for term in hit.matched)


async def _scored(session: AsyncSession, query: str, scope: Scope) -> _Scores | None:
    """Every chunk in scope holding a term of `query`, scored; None when there is none."""
    terms = list(dict.fromkeys(words(query)))
    if not terms:
        return None
    n, total = (await session.execute(scope.narrow(
        select(func.count(DocumentChunk.token_count), func.coalesce(func.sum(DocumentChunk.token_count), 0)),
        DocumentChunk))).one()
    if not n:
        return None
    average = (int(total) / n) or 1.0
    keys = {term_key(term): term for term in terms}
    found: dict[str, list[tuple[str, bytes]]] = {term: [] for term in terms}
    rows = await session.execute(scope.narrow(select(
        DocumentPosting.term, DocumentPosting.document_id, DocumentPosting.chunks).where(
        DocumentPosting.term.in_(list(keys))), DocumentPosting))
    for key, document_id, chunks in rows:
        found[keys[key]].append((document_id, bytes(chunks)))
    documents = sorted({document_id for rows_of_term in found.values() for document_id, _ in rows_of_term})
    if not documents:
        return None
    return _Scores(terms, found, documents, n, average)


class _Scores:
    """BM25 with arrays: each operation is the same IEEE double operation, in the same order, as the textbook
    loop (`idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))`, terms added in the query's order
    from 0.0), so scores are equal to the bit. A chunk is numbered by its document's place in id order and its
    seq, so that sorting by that number sorts by (document id, seq)."""

    def __init__(self, terms: list[str], found: dict[str, list[tuple[str, bytes]]], documents: list[str], n: int,
                 average: float) -> None:
        import numpy as np  # imported when first needed: numpy's import costs start-up time

        self.terms, self.documents = terms, documents
        place = {document_id: i for i, document_id in enumerate(documents)}
        per_term = []
        for term in terms:
            rows = found[term]
            triples = np.frombuffer(b"".join(chunks for _, chunks in rows), dtype="<u4").reshape(-1, 3).astype(
                np.int64)
            owners = np.repeat(np.array([place[d] for d, _ in rows], dtype=np.int64),
                               [len(chunks) // 12 for _, chunks in rows])
            per_term.append((owners << 32 | triples[:, 0], triples[:, 1], triples[:, 2]))
        self.chunk_ids = np.unique(np.concatenate([ids for ids, _, _ in per_term]))
        self.scores = np.zeros(len(self.chunk_ids), dtype=np.float64)
        self.lengths = np.zeros(len(self.chunk_ids), dtype=np.int64)
        self.holders = []
        for ids, tf, length in per_term:
            df = len(ids)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            at = np.searchsorted(self.chunk_ids, ids)  # a chunk holds a term once: no place is added to twice
            self.scores[at] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
            self.lengths[at] = length
            self.holders.append(at)
        # Every scored chunk by score, highest first, then by (document id, seq).
        self.order = np.lexsort((self.chunk_ids, -self.scores))

    def top_chunks(self, top_k: int) -> list[Hit]:
        return self._hits(self.order[:top_k])

    def top_documents(self, top_k: int) -> list[DocumentHit]:
        import numpy as np

        owners = self.chunk_ids >> 32
        # A document's best chunk is its first in `order`; documents rank by where their best chunk stands.
        _, first = np.unique(owners[self.order], return_index=True)
        best = self.order[np.sort(first)[:top_k]]
        matching = np.bincount(owners, minlength=len(self.documents))
        return [DocumentHit(hit, int(matching[int(owners[i])])) for hit, i in zip(self._hits(best), best, strict=True)]

    def _hits(self, chosen: Any) -> list[Hit]:
        import numpy as np

        matched = [np.isin(chosen, at) for at in self.holders]
        return [Hit(self.documents[int(self.chunk_ids[i]) >> 32], int(self.chunk_ids[i]) & 0xFFFFFFFF,
                    float(self.scores[i]), tuple(term for term, holds in zip(self.terms, matched, strict=True)
                                                 if holds[place]), int(self.lengths[i]))
                for place, i in enumerate(chosen)]
