"""The postings of capability search's first pass: for each term, the documents that use it and how often
(the field-weighted term frequency), in document order.

Held as two arrays per term (12 bytes a posting). As a dict of dicts of floats, the 700,000 postings of 10,000
imported handlers kept ~89 MB resident; as arrays, ~9 MB (bench/README.md, "Imported integrations: memory and
start-up"). The finished BM25 weights depend on the statistics of the caller's view (prism.registry.corpus), so
they are worked out when a query first asks for a term in a view and kept for the next queries (`KeptDicts`), up
to CACHED_POSTINGS postings in all: the words people search with recur. Search's concepts (a word and its
synonyms) are kept the same way.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable

CACHED_POSTINGS = 200_000  # ~16 MB of dicts at most


class KeptDicts:
    """`key → dict` kept between queries, up to `budget` entries in all; when the next one would pass it, all
    are let go and keeping starts over (simpler than recency, and a query rebuilds what it needs in
    milliseconds). The dicts are shared: not to be changed."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._kept: dict[Hashable, dict[int, float]] = {}
        self._size = 0

    def get(self, key: Hashable) -> dict[int, float] | None:
        return self._kept.get(key)

    def keep(self, key: Hashable, found: dict[int, float]) -> None:
        if self._size + len(found) > self.budget:
            self._kept, self._size = {}, 0
        self._kept[key] = found
        self._size += len(found)


_NONE: tuple[array[int], array[float]] = (array("i"), array("d"))


class Postings:
    def __init__(self) -> None:
        self._documents: dict[str, array[int]] = {}
        self._frequencies: dict[str, array[float]] = {}

    def add(self, term: str, document: int, frequency: float) -> None:
        """Documents are added in increasing order: a term's postings keep that order (ties rank by it)."""
        documents = self._documents.get(term)
        if documents is None:
            documents = self._documents[term] = array("i")
            self._frequencies[term] = array("d")
        documents.append(document)
        self._frequencies[term].append(frequency)

    def of(self, term: str) -> tuple[array[int], array[float]]:
        """The documents that use `term`, in increasing order, and its frequency in each (empty if none does).
        Not to be changed."""
        documents = self._documents.get(term)
        return _NONE if documents is None else (documents, self._frequencies[term])

    def __contains__(self, term: str) -> bool:
        return term in self._documents

    def __len__(self) -> int:
        """How many terms have postings."""
        return len(self._documents)
