"""Rows of the audit ledger rewritten in the database, then the ledger read through the API (audit_query/ledger/...).

docs/audit.md: "A log this process cannot use (a kept checkpoint or head rewritten so that it no longer parses, ...)
is a refusal `log_broken` of the command, never a traceback; the API's ledger listing shows a rewritten row as it is
(its `leaf_hash` null, its checks false) rather than failing." and "The same holds for a log that cannot be
extended (its stored entries do not continue its head)": the calls are still recorded, their entries left waiting.
"""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import select, text, update

from prism.ledger.entries import audit_entries, audit_heads
from prism.ledger.merkle import Frontier, leaf_hash
from prism.storage import Database
from tests.factories import Factory, ledger_keys
from tests.governance_support import ok, post
from tests.ledger_support import sealed_log

# PostgreSQL's CHECK that an entry's position is at least 1 (migration 0035).
POSITIONS_FROM_1 = "ck_audit_entries_seq_from_1"

LIST, READ = "audit_query/ledger/entry/list", "audit_query/ledger/entry/read"
EXPORT, VERIFY = "audit_query/ledger/entry/export", "audit_query/ledger/log/verify"
PARTS = "/prism/entity_crud/spare_parts/spare_part/list"


async def test_a_head_frontier_that_does_not_parse_leaves_calls_recorded_not_refused(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """The head's frontier rewritten so that it no longer parses (not hex): the log cannot be extended, like a
    head whose stored entries do not continue it (BrokenLog). The calls must still answer, their entries written
    waiting, and log/verify must answer. Today Frontier.from_hex raises ValueError inside the ledger batch, which
    only catches BrokenLog: every call of the organization is refused 503 `ledger_unavailable`, and nothing is
    recorded."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                        .values(frontier=["not hex"] * 3))
    listed = await post(client, ws, LIST, {})
    assert listed.status_code == 200, listed.text
    report = await post(client, ws, VERIFY, {"start": "first_entry"})
    assert report.status_code == 200, report.text


async def test_a_head_frontier_that_does_not_parse_does_not_refuse_another_organizations_calls(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """Calls of two organizations committed in one ledger batch: one organization's rewritten head frontier must
    not refuse the other organization's calls (nor leave them unrecorded)."""
    broken = await sealed_log(client, factory, db)
    other = await factory.workspace(roles=("owner",))
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == broken.org.id)
                        .values(frontier=[1, 2, 3]))
    for _ in range(5):
        answers = await asyncio.gather(
            *(client.post(PARTS, json={}, headers=broken.headers()) for _ in range(4)),
            *(client.post(PARTS, json={}, headers=other.headers()) for _ in range(4)))
        theirs = answers[4:]
        assert all(a.status_code == 200 for a in theirs), [(a.status_code, a.text[:200]) for a in theirs]


async def test_an_entry_moved_to_a_negative_position_is_shown_not_a_500(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """An entry's `seq` rewritten to -1 (taken out of the log): the listing, the entry and the export show it as
    it is (leaf_hash null, MAC check false), and verification names the gap; never a 500 (leaf_hash and the MAC
    check call int.to_bytes, which raises OverflowError, not caught)."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        moved = (await s.execute(select(audit_entries.c.id).where(
            audit_entries.c.organization_id == ws.org.id, audit_entries.c.seq == 2))).scalar_one()
        if not db.is_sqlite:  # PostgreSQL refuses the move by a CHECK: dropped meanwhile, as a database owner could
            await s.execute(text(f"ALTER TABLE audit_entries DROP CONSTRAINT {POSITIONS_FROM_1}"))
        await s.execute(update(audit_entries).where(audit_entries.c.id == moved).values(seq=-1))
    try:
        report = await ok(client, ws, VERIFY, {"start": "first_entry"})
        assert report["valid"] is False
        listed = await post(client, ws, LIST, {"page_size": 100})
        assert listed.status_code == 200, listed.text
        shown = await post(client, ws, READ, {"id": ledger_keys().entry_ref(ws.org.id, moved)})
        assert shown.status_code == 200, shown.text
        assert shown.json()["data"]["checks"]["mac_fits_position"] is False
        exported = await post(client, ws, EXPORT, {})
        assert exported.status_code == 200, exported.text
    finally:
        async with db.write() as s:
            await s.execute(update(audit_entries).where(audit_entries.c.id == moved).values(seq=2))
            if not db.is_sqlite:
                await s.execute(text(f"ALTER TABLE audit_entries ADD CONSTRAINT {POSITIONS_FROM_1} CHECK (seq >= 1)"))


async def test_an_entry_moved_to_the_largest_position_is_shown_not_a_500(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """An entry's `seq` rewritten to 2^63 - 1 (the largest a BIGINT holds): entry/read looks for the next position
    (seq + 1), a value no database column can be compared with; it must answer the entry, not a 500."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        moved = (await s.execute(select(audit_entries.c.id).where(
            audit_entries.c.organization_id == ws.org.id, audit_entries.c.seq == 2))).scalar_one()
        await s.execute(update(audit_entries).where(audit_entries.c.id == moved).values(seq=2**63 - 1))
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is False
    shown = await post(client, ws, READ, {"id": ledger_keys().entry_ref(ws.org.id, moved)})
    assert shown.status_code == 200, shown.text
    assert shown.json()["data"]["next_seq"] is None


async def test_an_entry_detail_rewritten_to_a_number_python_cannot_read_is_reported_not_a_500(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """An entry's `detail` rewritten to JSON the database accepts but orjson does not (1e400): the listing and
    verification must answer (the verification naming the entry), not fail with 500."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        moved = (await s.execute(select(audit_entries.c.id).where(
            audit_entries.c.organization_id == ws.org.id, audit_entries.c.seq == 2))).scalar_one()
        await s.execute(text("UPDATE audit_entries SET detail = :d WHERE id = :i"),
                        {"d": '{"status": 1e400}', "i": moved})
    report = await post(client, ws, VERIFY, {"start": "first_entry"})
    assert report.status_code == 200, report.text
    listed = await post(client, ws, LIST, {})
    assert listed.status_code == 200, listed.text


async def test_a_head_moved_back_over_stored_entries_leaves_calls_recorded_not_refused(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """The head's size, root and frontier set back to its first 2 entries while entries 3.. are still stored:
    "a log that cannot be extended (its stored entries do not continue its head)", whose calls are recorded with
    their entries left waiting (docs/audit.md, "Written with the call, sealed just after"). Today the seal gives
    the new entry position 3 again: the insert fails on UNIQUE (organization, seq) and every call of the batch
    is refused 503 `ledger_unavailable`, unrecorded."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        rows = (await s.execute(select(audit_entries.c.seq, audit_entries.c.entry_hash).where(
            audit_entries.c.organization_id == ws.org.id, audit_entries.c.seq <= 2)
            .order_by(audit_entries.c.seq))).all()
        tree = Frontier()
        for seq, entry_hash in rows:
            tree.append(leaf_hash(seq, bytes.fromhex(entry_hash)))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            tree_size=2, root=tree.root().hex(), frontier=tree.to_hex()))
    answer = await client.post(PARTS, json={}, headers=ws.headers())
    assert answer.status_code == 200, answer.text
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is False
