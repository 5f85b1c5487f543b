"""prism.registry.postings: compact postings that read back in document order, and the BM25 weights the first pass
adds up, made from them per corpus."""

from __future__ import annotations

from prism.registry.postings import KeptDicts, Postings
from prism.registry.registry import build_registry
from prism.registry.search import SearchIndex


def test_a_term_reads_back_in_document_order_with_its_frequencies() -> None:
    p = Postings()
    for doc, frequency in ((3, 0.5), (7, 1.25), (11, 2.0)):
        p.add("invoice", doc, frequency)
    p.add("vendor", 7, 0.75)
    assert list(zip(*p.of("invoice"), strict=True)) == [(3, 0.5), (7, 1.25), (11, 2.0)]
    assert list(zip(*p.of("vendor"), strict=True)) == [(7, 0.75)]
    assert [list(a) for a in p.of("payroll")] == [[], []] and "payroll" not in p and "vendor" in p
    assert len(p) == 2


def test_the_dicts_kept_between_queries_are_bounded() -> None:
    kept = KeptDicts(5)
    first = {doc: 1.0 for doc in range(4)}
    kept.keep(("everything", "a"), first)
    assert kept.get(("everything", "a")) is first
    kept.keep(("everything", "b"), {doc: 2.0 for doc in range(4)})  # 4 + 4 > 5: what was kept is let go
    assert kept.get(("everything", "a")) is None


def test_a_term_is_posted_for_exactly_the_handlers_whose_text_has_it() -> None:
    index = SearchIndex(build_registry())
    for term in ("ticket", "assign", "vendor", "list", "invoice"):
        found = index.term_postings(term)
        assert not found or index.term_postings(term) is found  # kept
        expected = [doc for doc, fields in enumerate(index.fields) if any(term in f for f in fields)]
        assert list(found) == expected, term  # every one, in document order (ties rank by it)
        assert all(weight > 0 for weight in found.values())
