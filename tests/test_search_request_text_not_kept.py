"""Capability search keeps no request's text: the term caches hold the catalog's words, and every distinct request
(500 characters each) used to stay in them, some 120 MiB of client text per process at the caches' bounds."""

from __future__ import annotations

import secrets
import string

import httpx

from prism.registry.search import _cached_stem, terms
from tests.factories import Factory
from tests.governance_support import ok

SEARCH = "report_query/core/registry/search"


async def test_requests_leave_nothing_in_the_term_caches(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await ok(client, ws, SEARCH, {"query": "list open invoices for acme, then close acme"})  # the catalog read once
    cached_terms, cached_stems = terms.cache_info().currsize, _cached_stem.cache_info().currsize
    for _ in range(5):
        made_up = "".join(secrets.choice(string.ascii_lowercase) for _ in range(40))  # a word nobody else sends
        answer = await ok(client, ws, SEARCH, {"query": f"list open invoices for {made_up}, then close {made_up}"})
        assert answer["results"][0]["coordinate"] == "entity_crud/finance/invoice/list"
    assert terms.cache_info().currsize == cached_terms
    assert _cached_stem.cache_info().currsize == cached_stems
