"""An entry waiting to be sealed has a MAC over its content hash and its row id: a waiting row copied, or two
swapped, is refused by the sealer (its log is not extended, the error names the entry) and named by
verification; two entries of one log with one content hash are a copy; identical calls of one batch are told
apart so that a log never holds two such entries legitimately (docs/audit.md "An entry")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
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
    assert not report.valid and "copied" in (report.reason or ""), report
    assert report.first_broken_id == ledger_keys().entry_ref(ws.org.id, copy), report


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
    assert not report.valid and report.first_broken_id == ledger_keys().entry_ref(ws.org.id, first), report


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


def _identical(ws: Workspace, at: datetime | None = None) -> Callable[[datetime, str, str | None, int], EntryDraft]:
    """A call's draft that says nothing another's does not: one caller, tool, arguments and outcome (and one time,
    the batch's or `at`)."""
    def draft_for(batch_time: datetime, outcome: str, error_code: str | None, status: int) -> EntryDraft:
        return EntryDraft(ws.org.id, ws.tenant.id, at or batch_time, None, None, "rest", "prism_whoami",
                          "prism_whoami", "0" * 64, outcome, error_code, {"status": status, "request_id": "fixed"})
    return draft_for


async def _hashes_and_nonces(db: Database, org_id: str) -> list[tuple[str, str | None]]:
    async with db.read() as s:
        rows = (await s.execute(select(audit_entries.c.entry_hash, audit_entries.c.detail)
                                .where(audit_entries.c.organization_id == org_id))).all()
    return [(r.entry_hash, r.detail.get("nonce")) for r in rows]


async def test_identical_calls_of_one_batch_are_entries_with_hashes_of_their_own(
        db: Database, factory: Factory, settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    writer = LedgerWriter(db, settings)
    try:
        await asyncio.gather(*(writer.record(ws.org.id, _identical(ws)) for _ in range(3)))
    finally:
        await writer.close()
    async with db.read() as s:
        times = (await s.execute(select(audit_entries.c.created_at)
                                 .where(audit_entries.c.organization_id == ws.org.id))).scalars().all()
    assert len(times) == 3 and len(set(times)) == 1, "one batch"
    entries = await _hashes_and_nonces(db, ws.org.id)
    assert len({digest for digest, _ in entries}) == 3 and len({nonce for _, nonce in entries}) == 3
    assert (await verified(db, ws.org.id)).valid


async def test_identical_calls_of_two_processes_in_one_microsecond_are_entries_with_hashes_of_their_own(
        db: Database, factory: Factory, settings: Settings) -> None:
    """Two processes each have their own ledger writer; one client-chosen request id, one microsecond."""
    ws = await factory.workspace(roles=("owner",))
    at = utcnow()
    writers = [LedgerWriter(db, settings), LedgerWriter(db, settings)]
    try:
        for writer in writers:
            await writer.record(ws.org.id, _identical(ws, at))
    finally:
        for writer in writers:
            await writer.close()
    entries = await _hashes_and_nonces(db, ws.org.id)
    assert len(entries) == 2 and entries[0][0] != entries[1][0]
    report = await verified(db, ws.org.id)
    assert report.valid, report
