"""The ledger list applies its `search` (it was accepted and ignored), and archiving through a position below 1
is a bad argument, not a range archived already."""

from __future__ import annotations

from pathlib import Path

import httpx

from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok
from tests.ledger_support import seal_waiting
from tests.processes import run_cli

PARTS = "entity_crud/spare_parts/spare_part"
LIST = "audit_query/ledger/entry/list"


async def test_the_list_does_not_ignore_its_search_parameter(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """audit_query/ledger/entry/list takes ListParams, whose `search` is described as "Case-insensitive text
    search"; the handler accepts it and drops it, so a search that matches nothing returns every entry."""
    ws = await factory.workspace(roles=("owner",))
    await ok(client, ws, f"{PARTS}/list", {})
    await seal_waiting(db, ws.org.id)
    found = await ok(client, ws, LIST, {"search": "no-entry-says-this-zzzz"})
    assert found["total"] == 0, found


async def test_archive_through_zero_is_not_called_already_archived(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    """docs/audit.md: `already_archived` is the refusal for entries archived before. On a log of which nothing
    was ever archived, `--through 0` (or a negative number) is refused as already_archived with "entries 1..0
    are archived already" — a position below 1 is a bad argument, not an archived range."""
    ws = await factory.workspace(roles=("owner",))
    await ok(client, ws, f"{PARTS}/list", {})
    await seal_waiting(db, ws.org.id)
    result = run_cli("audit", "archive", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--through", "0",
                     "--out", str(tmp_path / "a.jsonl"), "--json", database_url=database_url)
    assert result.returncode == 1, str(result)
    assert result.error["error"] != "already_archived", result.error
