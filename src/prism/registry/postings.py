"""The postings of capability search's first pass: for each term, the documents that use it and their finished
BM25 weights, in document order.

Held as two arrays per term (12 bytes a posting). As a dict of dicts of floats, the 700,000 postings of 10,000
imported handlers kept ~89 MB resident; as arrays, ~9 MB (bench/README.md, "Imported integrations: memory and
start-up"). A query reads a term's postings as a dict, made when first asked for and kept for the next
queries, up to CACHED_POSTINGS postings in all: the words people search with recur. Search's concepts (a word
and its synonyms) are kept the same way (`KeptDicts`).
"""

from __future__ import annotations

from array import array

CACHED_POSTINGS = 200_000  # ~16 MB of dicts at most


class KeptDicts:
    """`term → dict` kept between queries, up to `budget` entries in all; when the next one would pass it, all
    are let go and keeping starts over (simpler than recency, and a query rebuilds what it needs in
    microseconds). The dicts are shared: not to be changed."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: dict[str, dict[int, float]] = {}
        self._size = 0

    def get(self, term: str) -> dict[int, float] | None:
        return self._kept.get(term)

    def keep(self, term: str, found: dict[int, float]) -> None:
        if self._size + len(found) > self.budget:
            self._kept, self._size = {}, 0
        self._kept[term] = found
        self._size += len(found)


class Postings:
    def __init__(self) -> None:
        self._documents: dict[str, array[int]] = {}
        self._weights: dict[str, array[float]] = {}
        self._read = KeptDicts(CACHED_POSTINGS)

    def add(self, term: str, document: int, weight: float) -> None:
        """Documents are added in increasing order: a term's dict keeps that order (ties rank by it)."""
        documents = self._documents.get(term)
        if documents is None:
            documents = self._documents[term] = array("i")
            self._weights[term] = array("d")
        documents.append(document)
        self._weights[term].append(weight)

    def of(self, term: str) -> dict[int, float]:
        """`document → weight` for the documents that use `term` (empty if none does). Not to be changed."""
        found = self._read.get(term)
        if found is not None:
            return found
        documents = self._documents.get(term)
        if documents is None:
            return {}
        found = dict(zip(documents, self._weights[term], strict=True))
        self._read.keep(term, found)
        return found

    def __contains__(self, term: str) -> bool:
        return term in self._documents

    def __len__(self) -> int:
        """How many terms have postings."""
        return len(self._documents)
