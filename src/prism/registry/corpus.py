"""The corpus statistics capability search ranks with, per organization.

An organization sees an imported integration's handlers only while it has an enabled connection
(docs/integrations.md), and the numbers search ranks with must follow: counted over every handler of the
deployment, another organization's import (or a deployment integration this one never connected) would move this
organization's scores and confidences, which would tell it whether words occur in integrations it cannot see, and
make its search quality depend on what others import. So each caller ranks with the statistics of its *corpus*:
the built-in handlers plus the integrations its organization enabled (scopes and roles do not narrow it: they
hide built-in handlers from a caller, not words from a tenant).

Nothing is counted per organization. The index is built once over every handler, each integration's documents
forming runs of consecutive document numbers, and a corpus is the list of its runs: a term's document frequency
is the sum, over the runs, of how many of its postings (sorted by document) fall in each, two bisections a run;
the document count and average length follow from the runs and the documents' lengths. A corpus is made once per
set of enabled integrations (a few milliseconds at 10,000 handlers) and kept (prism.registry.search).

Every number is worked out as an index built over exactly the corpus's documents would work it out, in the same
order, so the answers for a corpus do not depend on anything outside it, down to the last bit.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import chain

from prism.registry.postings import Postings

# The built-in handlers' group: every corpus has them.
BUILT_IN = ""


class Idf:
    """`term → idf` over one corpus, worked out when first asked for; `in` tells whether any of its documents uses
    the term."""

    def __init__(self, corpus: Corpus) -> None:
        self._corpus = corpus
        self._known: dict[str, float | None] = {}

    def get(self, term: str, default: float) -> float:
        found = self._of(term)
        return default if found is None else found

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self._of(term) is not None

    def _of(self, term: str) -> float | None:
        if term in self._known:
            return self._known[term]
        frequency = self._corpus.document_frequency(term)
        n = self._corpus.size
        found = math.log(1.0 + (n - frequency + 0.5) / (frequency + 0.5)) if frequency else None
        if len(self._known) >= 65_536:  # a bound on what queries in words nobody uses can grow
            self._known.clear()
        self._known[term] = found
        return found


class Corpus:
    """The statistics of the documents in `runs` (sorted `(start, end)` ranges of document numbers): how many
    documents, their average length, each term's idf, what the rarest possible word weighs, and the words that
    open its operations' names and name its entities."""

    def __init__(self, integrations: frozenset[str], runs: Sequence[tuple[int, int]], postings: Postings,
                 lengths: Sequence[float], operation_verbs: frozenset[str], entity_terms: frozenset[str]) -> None:
        self.integrations = integrations
        self.runs = tuple(sorted(runs))
        self.size = sum(end - start for start, end in self.runs)
        self._postings = postings
        # One running sum in document order, as `sum` over an index of just these documents adds them.
        total = sum(chain.from_iterable(lengths[start:end] for start, end in self.runs))
        self.average = total / self.size if self.size else 1.0
        self.idf = Idf(self)
        # What a word no handler of the corpus uses weighs: as much as the rarest word could (document frequency 0).
        self.unknown_idf = math.log(1.0 + (self.size + 0.5) / 0.5)
        self.operation_verbs = operation_verbs
        self.entity_terms = entity_terms

    def document_frequency(self, term: str) -> int:
        documents, _ = self._postings.of(term)
        return sum(bisect_left(documents, end) - bisect_left(documents, start) for start, end in self.runs)

    def slices(self, term: str) -> list[tuple[array[int], array[float]]]:
        """The term's postings (documents, frequencies) within the corpus, run by run, in document order."""
        documents, frequencies = self._postings.of(term)
        found: list[tuple[array[int], array[float]]] = []
        for start, end in self.runs:
            low, high = bisect_left(documents, start), bisect_left(documents, end)
            if low < high:
                found.append((documents[low:high], frequencies[low:high]))
        return found
