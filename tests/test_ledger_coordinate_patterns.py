"""Filters of audit_query/ledger/entry/list and export."""

from __future__ import annotations

import httpx

from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok
from tests.ledger_support import sealed_log

LIST = "audit_query/ledger/entry/list"
EXPORT = "audit_query/ledger/entry/export"
PARTS = "entity_crud/spare_parts/spare_part"


async def test_a_coordinate_pattern_matches_case_as_the_exact_coordinate_does(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: `coordinate` is "exact, or with `*` for any run of characters". An exact coordinate is
    compared case-sensitively (on both engines); a pattern must be too: on SQLite, LIKE ignores ASCII case, so
    `ENTITY_CRUD/.../*` lists entries whose coordinate is `entity_crud/...` (PostgreSQL lists none)."""
    ws = await sealed_log(client, factory, db)
    assert (await ok(client, ws, LIST, {"coordinate": f"{PARTS}/list"}))["total"] >= 4
    assert (await ok(client, ws, LIST, {"coordinate": f"{PARTS.upper()}/LIST"}))["total"] == 0
    shouted = await ok(client, ws, LIST, {"coordinate": f"{PARTS.upper()}/*"})
    assert shouted["total"] == 0, [e["coordinate"] for e in shouted["items"]]
    exported = await ok(client, ws, EXPORT, {"coordinate": f"{PARTS.upper()}/*"})
    assert exported["count"] == 0

