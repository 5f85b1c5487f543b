"""The semantic rerank's memory across organizations and rebuilds (prism.registry.semantic): every corpus shares the
index's vectors and keeps only its centre and one number per row, so many organizations' corpora stay made side by
side; and a rebuilt index embeds only the texts the latest embeddings did not have."""

from __future__ import annotations

import gc
import uuid
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from prism.registry import HandlerApp, HandlerCall, Params, semantic
from prism.registry.search import index_for
from tests.search_registries import with_integrations

pytestmark = pytest.mark.skipif(not semantic.AVAILABLE, reason="the semantic extra is not installed")

QUERIES = ("approve the vendor invoice for payment", "ship a replacement pump to the north plant",
           "how many open tickets are there?")


async def _echo(call: HandlerCall, params: Any) -> dict[str, Any]:
    return {}


def _integration(name: str) -> HandlerApp:
    """A small integration with words of its own, each handler with an example request."""
    declared = (("invoice", "approveInvoice", "Approve a vendor invoice for payment."),
                ("shipment", "createShipment", "Ship a replacement part to a plant."),
                ("ledger", "closePeriod", f"Close the {name} ledger period."))
    app = HandlerApp(name, description=f"The {name} service: vendor invoices and shipments.", examples={
        f"integration_call/{name}/{entity}/{operation}": (f"{text} in {name}, please",)
        for entity, operation, text in declared})
    for entity, operation, text in declared:
        app.handler("integration_call", entity, operation, params=Params, scope="read", description=text)(_echo)
    return app


def _centred_cosines(vectors: np.ndarray, unit_of: np.ndarray) -> np.ndarray:
    """Cosines with each row centred on the rows' mean and normalised, as a copy of the rows would give them."""
    centre = vectors.mean(axis=0)
    rows = vectors - centre
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    query = unit_of - centre
    return rows @ (query / np.linalg.norm(query))


def test_many_corpora_stay_made_and_score_as_their_own_centred_rows() -> None:
    apps = [_integration(f"zq_{uuid.uuid4().hex[:8]}") for _ in range(6)]
    registry = with_integrations(*apps)
    index = index_for(registry)
    embedded = index.embedded()
    assert embedded is not None
    # Five organizations, each with all integrations but one: each corpus is nearly the whole index, so rows copied
    # per corpus (bounded at twice the index's) kept only two of them besides the index's own.
    views = [index.view(app.name for app in apps if app is not left_out) for left_out in apps[:5]]
    made = [view.embeddings() for view in views]
    for view, semantic_index in zip(views, made, strict=True):
        assert view.corpus.integrations in embedded
        assert view.embeddings() is semantic_index  # kept, not made again

    model = semantic.load_model()
    assert model is not None
    owners = embedded.example_owners
    for view, semantic_index in zip(views, made, strict=True):
        assert semantic_index is not None
        documents = np.concatenate([np.arange(start, end) for start, end in view.corpus.runs])
        member = np.zeros(index.size, dtype=np.bool_)
        member[documents] = True
        for query in QUERIES:
            got = semantic_index.scores(query)
            assert got is not None
            pooled = model.table[model.ids(query.lower())].astype(np.float32).mean(axis=0)
            expected = np.full(index.size, -np.inf, dtype=np.float32)
            expected[documents] = _centred_cosines(embedded.vectors[documents], pooled)
            chosen = member[owners]
            nearest = np.full(index.size, -np.inf, dtype=np.float32)
            np.maximum.at(nearest, owners[chosen], _centred_cosines(embedded.example_vectors[chosen], pooled))
            expected = np.maximum(expected, nearest)
            assert np.array_equal(np.isinf(got), ~member)  # documents outside the corpus never score
            assert np.allclose(got[member], expected[member], rtol=0, atol=1e-6), query


def test_a_rebuilt_index_embeds_only_new_texts_and_gets_the_same_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    model = semantic.load_model()
    assert model is not None
    first = _integration(f"zr_{uuid.uuid4().hex[:8]}")
    old = with_integrations(first)
    old_embedded = index_for(old).embedded()
    assert old_embedded is not None

    embedded_texts: list[str] = []
    real_embed = model.embed

    def counting(texts: Sequence[str]) -> np.ndarray:
        embedded_texts.extend(texts)
        return real_embed(texts)

    monkeypatch.setattr(model, "embed", counting)
    tag = uuid.uuid4().hex[:8]
    added = _integration(f"zs_{tag}")
    new = with_integrations(first, added)  # an import: a new registry, one more integration
    new_embedded = index_for(new).embedded()
    assert new_embedded is not None
    assert len(embedded_texts) == 2 * len(added.handlers)  # each new handler's text and its example request
    assert all(tag in text for text in embedded_texts)

    # The same vectors as embedding every text afresh.
    monkeypatch.setattr(semantic, "_latest", None)
    fresh = index_for(with_integrations(first, added)).embedded()
    assert fresh is not None
    assert np.array_equal(new_embedded.vectors, fresh.vectors)
    assert np.array_equal(new_embedded.example_vectors, fresh.example_vectors)

    # Nothing keeps the old index's vectors once it is gone: the module remembers only the latest build's.
    gone = weakref.ref(old_embedded.vectors)
    del old, old_embedded
    gc.collect()
    assert gone() is None
