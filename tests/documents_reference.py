"""Knowledge search as Prism computed it before the inverted index: BM25 over every chunk's text, read in
(document id, seq) order and tokenised at query time. The index must rank exactly as this does."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.documents.models import DocumentChunk
from prism.apps.documents.search import K1, STOPWORDS, B
from prism.apps.documents.text import extract_text, words


@dataclass(frozen=True, slots=True)
class Scored:
    index: int
    score: float
    matched: tuple[str, ...]


def bm25(query: str, texts: Sequence[str], *, top_k: int) -> list[Scored]:
    terms = list(dict.fromkeys(words(query)))
    if not terms or not texts:
        return []
    docs = [Counter(words(t)) for t in texts]
    lengths = [sum(d.values()) for d in docs]
    average = (sum(lengths) / len(docs)) or 1.0
    n = len(docs)
    idf = {}
    for term in terms:
        df = sum(1 for d in docs if term in d)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    scored = []
    for i, d in enumerate(docs):
        score, matched = 0.0, []
        for term in terms:
            tf = d.get(term, 0)
            if tf:
                matched.append(term)
                score += idf[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[i] / average))
        if score > 0:
            scored.append(Scored(i, score, tuple(matched)))
    scored.sort(key=lambda s: (-s.score, s.index))
    return scored[:top_k]


async def chunks_in_order(session: AsyncSession, organization_id: str, *, collection_id: str | None = None,
                          document_ids: list[str] | None = None, excluded: str | None = None) -> list[Any]:
    """The organization's chunks in scope, as the old search read them (ordered by the database)."""
    stmt = select(DocumentChunk).where(DocumentChunk.organization_id == organization_id)
    if collection_id:
        stmt = stmt.where(DocumentChunk.collection_id == collection_id)
    if document_ids is not None:
        stmt = stmt.where(DocumentChunk.document_id.in_(document_ids))
    if excluded is not None:
        stmt = stmt.where(DocumentChunk.document_id != excluded)
    return list((await session.execute(stmt.order_by(DocumentChunk.document_id, DocumentChunk.seq)))
                .scalars().all())


def ranked(query: str, chunks: list[Any], top_k: int) -> list[tuple[str, int, float, tuple[str, ...]]]:
    return [(chunks[s.index].document_id, chunks[s.index].seq, s.score, s.matched)
            for s in bm25(query, [c.text for c in chunks], top_k=top_k)]


def similar(content: str, content_type: str, document_id: str, chunks: list[Any],
            top_k: int) -> tuple[list[str], list[tuple[str, float]]]:
    """The old `similar` over the other documents' chunks: (terms, [(document id, score)])."""
    own = Counter(w for w in words(extract_text(content, content_type))
                  if len(w) > 2 and w not in STOPWORDS and not w.isdigit())
    vocabulary: dict[str, set[str]] = {}
    for c in chunks:
        for w in set(words(c.text)):
            vocabulary.setdefault(w, set()).add(c.document_id)
    others = len({c.document_id for c in chunks})

    def weight(w: str) -> float:
        return own[w] * math.log(1 + (others + 1) / (len(vocabulary.get(w, ())) + 1))

    terms = sorted(own, key=lambda w: (-weight(w), w))[:12]
    best: dict[str, float] = {}
    for hit in bm25(" ".join(terms), [c.text for c in chunks], top_k=1000):
        doc_id = chunks[hit.index].document_id
        best[doc_id] = max(best.get(doc_id, 0.0), hit.score)
    assert document_id not in best
    return terms, sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
