"""An entry waiting to be sealed has a MAC over its content hash and its row id: a waiting row copied, or two
swapped, is refused by the sealer (its log is not extended, the error names the entry) and named by
verification; two entries of one log with one content hash are a copy; identical calls of one batch are told
apart so that a log never holds two such entries legitimately (docs/audit.md "An entry")."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update

from prism.config import Settings
from prism.kit.timeutil import utcnow
from prism.ledger.entries import EntryDraft, audit_entries, content_hash, content_of
from prism.ledger.sealer import seal_all
from prism.ledger.writer import LedgerWriter
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import insert_waiting, seal_waiting, verified

COPIED = ("tenant_id", "created_at", "actor_user_id", "credential_id", "door", "tool_name", "coordinate",
          "arguments_digest", "outcome", "error_code", "detail", "entry_hash", "mac")


def _entry(ws: Workspace, n: int) -> dict[str, Any]:
    draft = EntryDraft(ws.org.id, ws.tenant.id, utcnow(), None, None, "rest", "prism_whoami",
                       "prism_whoami", f"{n:064x}", "allowed", None, {"n": n})
    content = content_of(draft)
    return {**content, "created_at": draft.created_at, "entry_hash": content_hash(content)}


async def _waiting(db: Database, ws: Workspace, count: int) -> list[int]:
    async with db.write() as s:
        return await insert_waiting(s, [_entry(ws, n) for n in range(count)])


async def _sealed_count(db: Database, org_id: str) -> int:
    async with db.read() as s:
        return int((await s.execute(select(func.count()).where(
            audit_entries.c.organization_id == org_id, audit_entries.c.seq.is_not(None)))).scalar_one())


async def test_a_copied_waiting_row_is_refused_by_the_sealer_and_named_by_verification(
        db: Database, factory: Factory, caplog: pytest.LogCaptureFixture) -> None:
    ws = await factory.workspace(roles=("owner",))
    [original] = await _waiting(db, ws, 1)
    async with db.write() as s:  # INSERT … SELECT: the same row again, under a new id
        row = (await s.execute(select(audit_entries).where(audit_entries.c.id == original))).one()
        copy = (await s.execute(insert(audit_entries).values(
            organization_id=ws.org.id, **{name: getattr(row, name) for name in COPIED}))).inserted_primary_key[0]
    with caplog.at_level(logging.ERROR, logger="prism.ledger"):
        await seal_waiting(db, ws.org.id)
    assert await _sealed_count(db, ws.org.id) == 0
    assert any(f"waiting entry {copy} does not fit its MAC" in str(r.message) for r in caplog.records), \
        caplog.records
    report = await verified(db, ws.org.id)
    assert not report.valid and report.first_broken_id == copy and "copied" in (report.reason or ""), report


async def test_two_swapped_waiting_rows_are_refused_and_named(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    first, second = await _waiting(db, ws, 2)
    async with db.write() as s:
        rows = {r.id: r for r in (await s.execute(select(audit_entries).where(
            audit_entries.c.id.in_([first, second])))).all()}
        for this, that in ((first, second), (second, first)):
            await s.execute(update(audit_entries).where(audit_entries.c.id == this).values(
                **{name: getattr(rows[that], name) for name in COPIED}))
    assert await seal_all(db, [ws.org.id], ledger_keys(), checkpoint_every=60.0) == 0
    report = await verified(db, ws.org.id)
    assert not report.valid and report.first_broken_id == first, report


async def test_two_entries_with_one_content_hash_are_a_copy(db: Database, factory: Factory) -> None:
    """As a sealer before ids were bound left a copied waiting row: both sealed, each with its position's MAC."""
    ws = await factory.workspace(roles=("owner",))
    entry = _entry(ws, 7)
    async with db.write() as s:
        await insert_waiting(s, [entry, dict(entry)])
    await seal_waiting(db, ws.org.id)
    assert await _sealed_count(db, ws.org.id) == 2
    report = await verified(db, ws.org.id)
    assert not report.valid and "one is a copy" in (report.reason or ""), report


async def test_identical_calls_of_one_batch_are_entries_with_hashes_of_their_own(
        db: Database, factory: Factory, settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    writer = LedgerWriter(db, settings)

    def draft_for(at: datetime, outcome: str, error_code: str | None, status: int) -> EntryDraft:
        return EntryDraft(ws.org.id, ws.tenant.id, at, None, None, "rest", "prism_whoami", "prism_whoami",
                          "0" * 64, outcome, error_code, {"status": status})

    try:
        await asyncio.gather(*(writer.record(ws.org.id, draft_for) for _ in range(3)))
    finally:
        await writer.close()
    async with db.read() as s:
        rows = (await s.execute(select(audit_entries.c.entry_hash, audit_entries.c.detail, audit_entries.c.created_at)
                                .where(audit_entries.c.organization_id == ws.org.id))).all()
    assert len({r.created_at for r in rows}) == 1, "one batch"
    assert len({r.entry_hash for r in rows}) == 3 and sorted(r.detail.get("repeat", 0) for r in rows) == [0, 1, 2]
    assert (await verified(db, ws.org.id)).valid
