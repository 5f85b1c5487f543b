"""prism.registry.postings: compact postings that read back exactly as the dicts the first pass adds up."""

from __future__ import annotations

import pytest

from prism.registry import postings as postings_module
from prism.registry.postings import Postings
from prism.registry.registry import build_registry
from prism.registry.search import SearchIndex


def test_a_term_reads_back_in_document_order_with_its_weights() -> None:
    p = Postings()
    for doc, weight in ((3, 0.5), (7, 1.25), (11, 2.0)):
        p.add("invoice", doc, weight)
    p.add("vendor", 7, 0.75)
    assert list(p.of("invoice").items()) == [(3, 0.5), (7, 1.25), (11, 2.0)]
    assert p.of("vendor") == {7: 0.75}
    assert p.of("payroll") == {} and "payroll" not in p and "vendor" in p
    assert len(p) == 2


def test_the_dicts_kept_between_queries_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings_module, "CACHED_POSTINGS", 5)
    p = Postings()
    for doc in range(4):
        p.add("a", doc, 1.0)
        p.add("b", doc, 2.0)
    first = p.of("a")
    assert p.of("a") is first  # kept
    p.of("b")  # 4 + 4 > 5: what was kept is let go
    assert p.of("a") is not first and p.of("a") == first


def test_a_term_is_posted_for_exactly_the_handlers_whose_text_has_it() -> None:
    index = SearchIndex(build_registry())
    for term in ("ticket", "assign", "vendor", "list", "invoice"):
        found = index.postings.of(term)
        expected = [doc for doc, fields in enumerate(index._fields) if any(term in f for f in fields)]
        assert list(found) == expected, term  # every one, in document order (ties rank by it)
        assert all(weight > 0 for weight in found.values())
