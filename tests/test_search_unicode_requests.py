"""Capability search reads a request's words alike however its letters are encoded: full-width letters (CJK input
methods), a soft hyphen inside a word, a Turkish dotted capital I were read as no words or broken fragments, and
the request got no result, or a wrong one flagged no_match."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import ok

SEARCH = "report_query/core/registry/search"


FULL_WIDTH = "".join(chr(0xFEE0 + ord(c)) if c != " " else c for c in "list open invoices")


@pytest.mark.parametrize("spelled", [FULL_WIDTH, "LIST OPEN \u0130NVOICES", "list open in\u00advoices"])
async def test_a_request_is_read_alike_however_its_letters_are_encoded(
        client: httpx.AsyncClient, factory: Factory, spelled: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    plain = await ok(client, ws, SEARCH, {"query": "list open invoices"})
    other = await ok(client, ws, SEARCH, {"query": spelled})
    assert plain["results"][0]["coordinate"] == "entity_crud/finance/invoice/list"
    assert other["results"] and other["results"][0]["coordinate"] == plain["results"][0]["coordinate"], other
    assert other["no_match"] is False
