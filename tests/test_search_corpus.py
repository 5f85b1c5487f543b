"""Capability search ranks each organization with the statistics of its own corpus (prism.registry.corpus): the
built-in handlers plus the integrations it enabled. A view of the index over every handler must answer exactly, to
the last bit of every score, confidence and feature, as an index built over just that corpus would: then nothing
another organization imports (its own integration, or a deployment integration this one never connected) can move
what this organization gets, and an organization that enabled every integration gets what it always got."""

from __future__ import annotations

from typing import Any

import pytest

from prism.registry import HandlerApp, HandlerCall, Params
from prism.registry.capability import find
from prism.registry.registry import Registry
from prism.registry.search import SearchView, index_for, terms
from tests.search_registries import with_integrations

QUERIES = (
    "list the vendor invoices awaiting payment approval",  # words the integrations below share with built-ins
    "approve invoice 4410 from the vendor",
    "how many open tickets are assigned to the service desk?",
    "reconcile the vendor payments with the bank statement, then close the period",
    "ship the replacement pump to the north plant",
    "zorblax the frobnicator",  # words only an integration uses
    "delete the duplicate vendor record",
)


async def _echo(call: HandlerCall, params: Any) -> dict[str, Any]:
    return {}


def _integration(name: str, description: str, operations: dict[tuple[str, str], str]) -> HandlerApp:
    app = HandlerApp(name, description=description)
    for (entity, operation), text in operations.items():
        app.handler("integration_call", entity, operation, params=Params, scope="read", description=text,
                    keywords=("vendor bill", "payables"))(_echo)
    return app


PAYABLES = _integration("zz_payables", "Vendor invoices and payments of a payables service.", {
    ("invoice", "listInvoices"): "List vendor invoices awaiting payment approval.",
    ("invoice", "approveInvoice"): "Approve a vendor invoice for payment.",
    ("payment", "reconcilePayments"): "Reconcile vendor payments with a bank statement.",
    ("vendor", "deleteVendor"): "Delete a duplicate vendor record.",
})
# Named to sort first: its documents come before the others' in the index, and every number must ignore that.
SHIPPING = _integration("aa_shipping", "Shipments of spare parts between plants, zorblax frobnicators included.", {
    ("shipment", "createShipment"): "Ship a replacement part or pump to a plant.",
    ("shipment", "listShipments"): "List open shipments and tickets about them.",
    ("frobnicator", "zorblax"): "Zorblax the frobnicator of a shipment.",
})


def _answers(view: SearchView, registry: Registry, enabled: frozenset[str]) -> list[Any]:
    visible = tuple(h for h in registry if h.integration is None or h.integration in enabled)
    answers = []
    for query in QUERIES:
        found = find(view, query, visible, limit=10)
        answers.append((query, found.ranker, found.no_match,
                        [(h.handler.path, h.score, h.confidence, h.features) for h in found.hits],
                        [(h.handler.path, h.score, h.confidence) for h in found.plan]))
    return answers


@pytest.mark.parametrize("enabled", [(), (PAYABLES,), (SHIPPING,)], ids=["built-in only", "payables", "shipping"])
def test_a_view_answers_as_an_index_of_its_corpus_alone(enabled: tuple[HandlerApp, ...]) -> None:
    names = frozenset(app.name for app in enabled)
    alone = with_integrations(*enabled)
    everything = with_integrations(SHIPPING, PAYABLES)
    expected = _answers(index_for(alone), alone, names)
    got = _answers(index_for(everything).view(names), everything, names)
    assert got == expected


def test_the_view_of_every_integration_is_the_index_itself() -> None:
    index = index_for(with_integrations(SHIPPING, PAYABLES))
    assert index.view({PAYABLES.name, SHIPPING.name, "not_imported"}) is index
    assert index.view({PAYABLES.name}) is index.view([PAYABLES.name])  # one view per corpus, kept


def test_words_only_an_integration_uses_are_known_only_to_those_who_enabled_it() -> None:
    index = index_for(with_integrations(SHIPPING, PAYABLES))
    words = terms("zorblax frobnicator")
    assert index.view({SHIPPING.name}).known(words) == 1.0
    assert index.view({PAYABLES.name}).known(words) == 0.0
    assert index.view(()).unknown_idf < index.view({PAYABLES.name}).unknown_idf  # more documents, rarer words
