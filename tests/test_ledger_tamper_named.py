"""Tampering verification named no entry or missed: an entry rewritten as a chained one, a chained entry's
content read back as matching, entries left below a moved `pruned_through`."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select, update

from prism.ledger.entries import (
    GENESIS_HASH,
    audit_checkpoints,
    audit_entries,
    audit_heads,
    content_of,
    legacy_chain_hash,
)
from prism.ledger.merkle import Frontier, leaf_hash
from prism.ledger.verify import verify_log
from prism.storage import Database
from tests.factories import Factory, ledger_keys
from tests.governance_support import ok
from tests.ledger_support import sealed_log

PARTS = "entity_crud/spare_parts/spare_part"
READ = "audit_query/ledger/entry/read"



async def _row(db: Database, org_id: str, seq: int) -> Any:
    async with db.read() as s:
        return (await s.execute(select(audit_entries).where(audit_entries.c.organization_id == org_id,
                                                            audit_entries.c.seq == seq))).one()


async def _report(db: Database, org_id: str) -> Any:
    async with db.read() as s:
        return await verify_log(s, org_id, ledger_keys())


async def test_a_rewritten_entry_disguised_as_a_chained_one_is_named(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: an entry changed, even with its hash, every later leaf, the tree and the head recomputed,
    is named by verification ("that entry: its MAC does not fit"). Giving the rewritten entry a prev_hash makes
    verification check it as a pre-tree chained entry (no MAC), so the report names no entry at all."""
    ws = await sealed_log(client, factory, db, calls=6)
    row = await _row(db, ws.org.id, 3)
    forged = {**content_of(row), "outcome": "refused", "error_code": "permission_denied"}
    chain = legacy_chain_hash(GENESIS_HASH, forged, 3)
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.id == row.id).values(
            outcome="refused", error_code="permission_denied", prev_hash=GENESIS_HASH, hash=chain,
            entry_hash=chain))
        rows = (await s.execute(select(audit_entries.c.seq, audit_entries.c.entry_hash).where(
            audit_entries.c.organization_id == ws.org.id).order_by(audit_entries.c.seq))).all()
        tree = Frontier()
        for seq, entry_hash in rows:
            tree.append(leaf_hash(seq, bytes.fromhex(entry_hash)))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            root=tree.root().hex(), frontier=tree.to_hex()))
    report = await _report(db, ws.org.id)
    assert report.valid is False
    assert report.first_broken_seq == 3 and report.first_broken_id == ledger_keys().entry_ref(ws.org.id, row.id), report


async def test_a_rewritten_entry_disguised_as_a_chained_one_is_named_with_the_heads_chained_size_raised(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: the head's `seq` (the positions the hash chain had before the tree) is not signed. Raised
    over an entry rewritten as a chained one, it made verification check that entry as chained (no MAC): the
    rewrite was still caught by the head's signature, but the report named no entry. The chain only ever came
    before the tree, so a chained entry after one checked by its MAC is checked by its MAC, and named."""
    ws = await sealed_log(client, factory, db, calls=6)
    row = await _row(db, ws.org.id, 4)
    forged = {**content_of(row), "outcome": "refused", "error_code": "permission_denied"}
    chain = legacy_chain_hash(GENESIS_HASH, forged, 4)
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.id == row.id).values(
            outcome="refused", error_code="permission_denied", prev_hash=GENESIS_HASH, hash=chain,
            entry_hash=chain, mac=None))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(seq=4))
    report = await _report(db, ws.org.id)
    assert report.valid is False
    assert report.first_broken_seq == 4 and report.first_broken_id == ledger_keys().entry_ref(ws.org.id, row.id), report


async def test_the_read_handler_checks_a_chained_entrys_content_against_its_hash(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: entry/read returns the entry with "its content hash and MAC checked (`checks`)". For an
    entry of the pre-tree hash chain, `content_matches_hash` only compares two stored columns (hash ==
    entry_hash) and never hashes the content: an altered chained entry is shown as matching, while
    `prism audit verify` names it."""
    ws = await sealed_log(client, factory, db, calls=6)
    row = await _row(db, ws.org.id, 1)
    # Entry 1 as the chained ledger would have written it (a log upgraded from the hash chain) ...
    chain = legacy_chain_hash(GENESIS_HASH, content_of(row), 1)
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.id == row.id).values(
            prev_hash=GENESIS_HASH, hash=chain, entry_hash=chain, mac=None))
    # ... then altered by someone with database access.
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.id == row.id).values(
            coordinate=f"{PARTS}/delete"))
    report = await _report(db, ws.org.id)
    assert report.valid is False and report.first_broken_seq == 1  # verification sees it
    shown = await ok(client, ws, READ, {"id": ledger_keys().entry_ref(ws.org.id, row.id)})
    assert shown["checks"]["content_matches_hash"] is False, shown["checks"]


async def test_entries_left_below_pruned_through_are_still_checked(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: archive --prune deletes entries 1..N in the same transaction that sets pruned_through.
    Setting pruned_through (an unsigned column) to the size of any kept checkpoint makes verification skip
    entries that are still in the database, so an altered entry there is never reported, while the API lists
    it as part of the log."""
    ws = await sealed_log(client, factory, db, calls=6)
    async with db.read() as s:
        kept = sorted((await s.execute(select(audit_checkpoints.c.tree_size).where(
            audit_checkpoints.c.organization_id == ws.org.id))).scalars())
    assert kept, "a kept checkpoint"
    n = kept[-1]
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 1).values(outcome="refused"))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            pruned_through=n))
    report = await _report(db, ws.org.id)
    assert report.valid is False, report
