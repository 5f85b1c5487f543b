"""An entry stored at position 0 or below lies outside the log: the entry list and export show it, so verification
(`log/verify`, `prism audit verify`) names it. On PostgreSQL a CHECK refuses such a row in the first place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, insert, select, text
from sqlalchemy.exc import IntegrityError

from prism.ledger.entries import audit_entries, content_hash, content_of
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok
from tests.ledger_support import sealed_log
from tests.processes import run_cli

LIST, EXPORT = "audit_query/ledger/entry/list", "audit_query/ledger/entry/export"
VERIFY = "audit_query/ledger/log/verify"
CHECK = "ck_audit_entries_seq_from_1"


async def _sealed_rows(db: Database, organization_id: str) -> list[dict[str, Any]]:
    async with db.read() as s:
        return [dict(r._mapping) for r in (await s.execute(select(audit_entries).where(
            audit_entries.c.organization_id == organization_id).order_by(audit_entries.c.seq))).all()]


@asynccontextmanager
async def _stored(db: Database, row: dict[str, Any]) -> AsyncIterator[None]:
    """`row` inserted as a database writer would, bypassing PostgreSQL's CHECK (dropped meanwhile, then restored)."""
    if not db.is_sqlite:
        async with db.write() as s:
            await s.execute(text(f"ALTER TABLE audit_entries DROP CONSTRAINT {CHECK}"))
    try:
        async with db.write() as s:
            await s.execute(insert(audit_entries).values(**row))
        yield
    finally:
        async with db.write() as s:
            await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == row["organization_id"],
                                                        audit_entries.c.seq == row["seq"]))
            if not db.is_sqlite:
                await s.execute(text(f"ALTER TABLE audit_entries ADD CONSTRAINT {CHECK} CHECK (seq >= 1)"))


async def test_a_copy_of_an_entry_at_position_0_is_named(client: httpx.AsyncClient, factory: Factory,
                                                        db: Database, database_url: str) -> None:
    ws = await sealed_log(client, factory, db, calls=3)
    other = await sealed_log(client, factory, db, calls=2)
    copy = {k: v for k, v in (await _sealed_rows(db, ws.org.id))[1].items() if k != "id"}
    copy["seq"] = 0
    async with _stored(db, copy):
        exported = await ok(client, ws, EXPORT, {})
        assert exported["first_seq"] == 0  # shown first: verification must not pass over it
        report = await ok(client, ws, VERIFY, {"start": "first_entry"})
        assert report["valid"] is False
        assert report["first_broken_seq"] == 0 and report["first_broken_id"], report
        assert "position 0" in report["reason"]
        quick = await ok(client, ws, VERIFY, {})  # from the newest kept checkpoint: still named
        assert quick["valid"] is False and quick["first_broken_seq"] == 0, quick
        result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug,
                         database_url=database_url)
        assert result.returncode == 1, str(result)
        assert "position 0" in result.stdout + result.stderr, str(result)
        # Another organization's log is not concerned.
        assert (await ok(client, other, VERIFY, {"start": "first_entry"}))["valid"] is True
    assert (await ok(client, ws, VERIFY, {"start": "first_entry"}))["valid"] is True


async def test_a_forged_entry_at_a_negative_position_is_named(client: httpx.AsyncClient, factory: Factory,
                                                             db: Database) -> None:
    ws = await sealed_log(client, factory, db, calls=3)
    other = await sealed_log(client, factory, db, calls=2)
    forged = {k: v for k, v in (await _sealed_rows(db, ws.org.id))[0].items() if k != "id"}
    forged.update(coordinate="entity_crud/finance/invoice/delete", seq=-7, mac="0" * 64)
    forged["entry_hash"] = content_hash(content_of(type("Row", (), forged)))
    async with _stored(db, forged):
        listed = await ok(client, ws, LIST, {"page_size": 100})
        assert "entity_crud/finance/invoice/delete" in [i["coordinate"] for i in listed["items"]]
        report = await ok(client, ws, VERIFY, {"start": "first_entry"})
        assert report["valid"] is False and report["first_broken_seq"] == -7, report
        assert "position -7" in report["reason"]
        other_listed = await ok(client, other, LIST, {"page_size": 100})
        assert "entity_crud/finance/invoice/delete" not in [i["coordinate"] for i in other_listed["items"]]
        assert (await ok(client, other, VERIFY, {"start": "first_entry"}))["valid"] is True


async def test_postgresql_refuses_a_position_below_1(client: httpx.AsyncClient, factory: Factory,
                                                    db: Database) -> None:
    if db.is_sqlite:
        pytest.skip("SQLite has no such CHECK (adding it rebuilds the table); verification names the entry")
    ws = await sealed_log(client, factory, db, calls=1)
    copy = {k: v for k, v in (await _sealed_rows(db, ws.org.id))[0].items() if k != "id"}
    for seq in (0, -1):
        with pytest.raises(IntegrityError):
            async with db.write() as s:
                await s.execute(insert(audit_entries).values(**{**copy, "seq": seq}))
