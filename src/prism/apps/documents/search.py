"""BM25 ranking of document chunks (Okapi BM25, k1 = 1.2, b = 0.75).

The corpus is the caller's organization's chunks (optionally narrowed to a collection or documents),
read at query time: statistics are always current, nothing is indexed behind the transaction, and
another organization's text can never weigh on a score. Scores are computed in Python over at most
MAX_CHUNKS chunks, which suits a knowledge base of thousands of pages per organization.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from prism.apps.documents.text import words

K1 = 1.2
B = 0.75
MAX_CHUNKS = 20_000
# Function words that say nothing about a document's subject (used to pick a document's own terms).
STOPWORDS = frozenset("""a about after all also an and any are as at be been before but by can could do does each
for from had has have how if in into is it its may more most must no not of on or other our out over should so
some such than that the their them then there these they this those through to under up use used was we were
what when where which while who will with within without would you your""".split())


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
