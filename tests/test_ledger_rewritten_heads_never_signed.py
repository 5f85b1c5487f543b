"""A head rewritten in the database is signed again by the next call's seal, hiding the rewrite.

docs/audit.md "Verifying": someone with write access to the database who "deletes the tail and rebuilds the head
to match" is seen as "the head's signature, and any kept checkpoint larger than the log". The sealer extends the
head row as it finds it (its tree_size, frontier) without checking it against its signed checkpoint, and signs
the result: after the next call, the truncated log verifies.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import delete, func, select, update

from prism.kit.timeutil import utcnow
from prism.ledger.entries import (
    GENESIS_HASH,
    audit_checkpoints,
    audit_entries,
    audit_heads,
    content_of,
    legacy_chain_hash,
)
from prism.ledger.merkle import Frontier, leaf_hash
from prism.ledger.sealer import BrokenHeads, keep_due_checkpoints, seal_all
from prism.storage import Database
from tests.factories import Factory, ledger_keys
from tests.governance_support import ok
from tests.ledger_support import seal_waiting, sealed_log, write_waiting
from tests.processes import run_cli

VERIFY = "audit_query/ledger/log/verify"
PARTS = "/prism/entity_crud/spare_parts/spare_part/list"


async def _cut_tail_and_rebuild_head(db: Database, organization_id: str, keep: int, *,
                                     checkpoint: str | bool | None = False) -> None:
    """What a database writer without the master secret can do: delete entries after `keep`, delete the kept
    checkpoints beyond, and set the head's size, root and frontier to the first `keep` entries (all public
    hashes). `checkpoint`: False keeps the old signed checkpoint text, otherwise the value written."""
    async with db.write() as s:
        rows = (await s.execute(select(audit_entries.c.seq, audit_entries.c.entry_hash).where(
            audit_entries.c.organization_id == organization_id, audit_entries.c.seq.is_not(None),
            audit_entries.c.seq <= keep).order_by(audit_entries.c.seq))).all()
        tree = Frontier()
        for seq, entry_hash in rows:
            tree.append(leaf_hash(seq, bytes.fromhex(entry_hash)))
        assert tree.size == keep
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == organization_id,
                                                    audit_entries.c.seq > keep))
        await s.execute(delete(audit_checkpoints).where(audit_checkpoints.c.organization_id == organization_id,
                                                        audit_checkpoints.c.tree_size > keep))
        values = {"tree_size": keep, "root": tree.root().hex(), "frontier": tree.to_hex()}
        if checkpoint is not False:
            values["checkpoint"] = checkpoint
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id).values(**values))


async def test_a_cut_log_with_its_head_rebuilt_stays_broken_after_the_next_call(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await sealed_log(client, factory, db, calls=6)
    await _cut_tail_and_rebuild_head(db, ws.org.id, keep=2)
    before = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert before["valid"] is False, before  # the head's signature: as documented
    answer = await client.post(PARTS, json={}, headers=ws.headers())
    assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)
    after = await ok(client, ws, VERIFY, {"start": "first_entry"})
    # The entries removed are still removed: the log must not become valid because a call was sealed onto it.
    assert after["valid"] is False, after


async def test_a_head_whose_checkpoint_was_rewritten_to_garbage_is_not_signed_again(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """The same cut with the head's checkpoint overwritten by text that does not parse: the sealer "leaves it to
    verification" (sealer._refuse_another_key) and then overwrites it with a fresh signature."""
    ws = await sealed_log(client, factory, db, calls=6)
    await _cut_tail_and_rebuild_head(db, ws.org.id, keep=2, checkpoint="garbage")
    answer = await client.post(PARTS, json={}, headers=ws.headers())
    assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)
    after = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert after["valid"] is False, after


async def test_an_entry_rewritten_with_its_head_rebuilt_stays_broken_after_the_next_call(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: someone who "changes an entry (...), even recomputing its hash, every later leaf, the tree
    and the head" is seen as "that entry". Rewritten as a chained entry (prev_hash = the genesis hash, its chain
    hash as entry_hash, no MAC) with the head's unsigned `seq` raised over it, and the head's size, root and
    frontier rebuilt from the public leaf hashes: the next call's seal signs that head, and the whole log then
    verifies, the rewritten entry included."""
    ws = await sealed_log(client, factory, db, calls=6)
    async with db.write() as s:
        row = (await s.execute(select(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                           audit_entries.c.seq == 2))).one()
        content = {**content_of(row), "outcome": "refused", "error_code": "permission_denied"}
        chained = legacy_chain_hash(GENESIS_HASH, content, 2)
        await s.execute(update(audit_entries).where(audit_entries.c.id == row.id).values(
            outcome="refused", error_code="permission_denied", prev_hash=GENESIS_HASH, hash=chained,
            entry_hash=chained, mac=None))
        leaves = (await s.execute(select(audit_entries.c.seq, audit_entries.c.entry_hash).where(
            audit_entries.c.organization_id == ws.org.id, audit_entries.c.seq.is_not(None))
            .order_by(audit_entries.c.seq))).all()
        tree = Frontier()
        for seq, entry_hash in leaves:
            tree.append(leaf_hash(seq, bytes.fromhex(entry_hash)))
        await s.execute(delete(audit_checkpoints).where(audit_checkpoints.c.organization_id == ws.org.id,
                                                        audit_checkpoints.c.tree_size >= 2))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            seq=2, tree_size=tree.size, root=tree.root().hex(), frontier=tree.to_hex()))
    answer = await client.post(PARTS, json={}, headers=ws.headers())
    assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)
    after = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert after["valid"] is False, after


async def test_a_head_stripped_of_its_signature_is_signed_only_by_the_upgrade_from_the_chain(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    """A head set back to what a log written before the tree looks like (no checkpoint, an empty tree, the chain
    length in `seq`) was signed by the next seal or the next start, whatever entries it then covered. Only the
    upgrade across migration 0013 signs a head for the first time; `prism migrate` on a database already past it,
    calls and `prism audit seal` leave it unsigned; `--sign-unsigned-heads` is the operator saying so."""
    ws = await sealed_log(client, factory, db, calls=4)
    async with db.write() as s:
        await s.execute(delete(audit_checkpoints).where(audit_checkpoints.c.organization_id == ws.org.id))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            checkpoint=None, tree_size=0, root=None, frontier=None, seq=2))
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq > 2))
    answer = await client.post(PARTS, json={}, headers=ws.headers())
    assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)
    migrated = run_cli("migrate", "--json", database_url=database_url)
    assert migrated.returncode == 0, str(migrated)
    sealed = run_cli("audit", "seal", "--json", database_url=database_url)
    assert sealed.returncode == 0, str(sealed)
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is False and "not signed" in report["reason"], report
    async with db.read() as s:
        head = (await s.execute(select(audit_heads.c.checkpoint).where(
            audit_heads.c.organization_id == ws.org.id))).scalar_one()
    assert head is None
    adopted = run_cli("audit", "seal", "--sign-unsigned-heads", "--json", database_url=database_url)
    assert adopted.returncode == 0, str(adopted)
    async with db.read() as s:
        head = (await s.execute(select(audit_heads.c.checkpoint).where(
            audit_heads.c.organization_id == ws.org.id))).scalar_one()
    assert head is not None  # on the operator's word


async def test_a_rewritten_head_due_for_a_checkpoint_is_logged_once_and_the_other_logs_are_checkpointed(
        client: httpx.AsyncClient, factory: Factory, db: Database, caplog: pytest.LogCaptureFixture) -> None:
    """The sweep keeps the checkpoint of each log that went quiet (keep_due_checkpoints). A rewritten head stays
    due for ever: it is logged once, not on every sweep (a write transaction and an error a second, for ever), and
    tried again when the head changes; the other logs' checkpoints are kept meanwhile."""
    rewritten, healthy = await sealed_log(client, factory, db), await sealed_log(client, factory, db)
    hour_ago = utcnow() - timedelta(hours=1)
    async with db.write() as s:
        for ws in (rewritten, healthy):  # both quiet since their last kept checkpoint, an hour ago
            await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                            .values(checkpointed_at=hour_ago - timedelta(minutes=1), sealed_at=hour_ago))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == rewritten.org.id)
                        .values(root="00" * 32))
    broken = BrokenHeads()

    async def sweep(times: int) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="prism.ledger"):
            for _ in range(times):
                await keep_due_checkpoints(db, ledger_keys(), checkpoint_every=60.0, broken=broken)
        return [r.getMessage() for r in caplog.records if rewritten.org.id in r.getMessage()]

    assert len(await sweep(3)) == 1 and broken.remembered([rewritten.org.id])
    async with db.read() as s:
        sizes = dict((await s.execute(select(audit_checkpoints.c.organization_id,
                                             func.max(audit_checkpoints.c.tree_size))
                                      .where(audit_checkpoints.c.organization_id.in_(
                                          [rewritten.org.id, healthy.org.id]))
                                      .group_by(audit_checkpoints.c.organization_id))).all())
    assert sizes[healthy.org.id] == 4 and sizes[rewritten.org.id] < 4
    async with db.write() as s:  # the head changes again: tried again, and still refused
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == rewritten.org.id)
                        .values(checkpoint=audit_heads.c.checkpoint + " "))
    assert len(await sweep(2)) == 1


async def _waiting(db: Database, organization_id: str) -> int:
    async with db.read() as s:
        return (await s.execute(select(func.count()).where(audit_entries.c.organization_id == organization_id,
                                                           audit_entries.c.seq.is_(None)))).scalar_one()


async def test_a_rewritten_head_with_entries_waiting_is_logged_once_and_the_other_logs_are_sealed(
        client: httpx.AsyncClient, factory: Factory, db: Database, caplog: pytest.LogCaptureFixture) -> None:
    """docs/audit.md: a log that cannot be extended is logged once and tried again only when its head changes.
    The sweep (seal_all, every second) tried a rewritten head with entries waiting on every sweep: a write
    transaction and an error line a second, for ever. The other organizations' logs are sealed meanwhile."""
    rewritten, healthy = await sealed_log(client, factory, db), await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == rewritten.org.id)
                        .values(root="00" * 32))
    await write_waiting(db, rewritten)
    broken = BrokenHeads()

    async def sweep(times: int) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="prism.ledger"):
            for _ in range(times):
                await write_waiting(db, healthy)  # another organization's call, left to the sweep
                await seal_all(db, [rewritten.org.id, healthy.org.id], ledger_keys(), checkpoint_every=60.0,
                               broken=broken)
                assert await _waiting(db, healthy.org.id) == 0  # sealed, on every sweep
        return [r.getMessage() for r in caplog.records if rewritten.org.id in r.getMessage()]

    assert len(await sweep(3)) == 1
    assert await _waiting(db, rewritten.org.id) == 1  # left as it is, for verification to name
    # Found broken already, the log is skipped without a write transaction: the sweep does not wait for a
    # transaction that holds its head (PostgreSQL) or the database's write lock (SQLite).
    async with db.write() as s:
        await s.execute(select(audit_heads.c.tree_size).where(audit_heads.c.organization_id == rewritten.org.id)
                        .with_for_update())
        await asyncio.wait_for(seal_all(db, [rewritten.org.id], ledger_keys(), checkpoint_every=60.0,
                                        broken=broken), timeout=5)
    async with db.write() as s:  # the head changes again: tried again, logged again, and still refused
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == rewritten.org.id)
                        .values(root="11" * 32))
    assert len(await sweep(2)) == 1
    assert await _waiting(db, rewritten.org.id) == 1


async def test_calls_to_a_log_whose_head_was_rebuilt_log_it_once_not_once_per_batch(
        client: httpx.AsyncClient, factory: Factory, db: Database, caplog: pytest.LogCaptureFixture) -> None:
    """Each batch of calls meets the broken head again (on SQLite it seals its own entries): the error is said
    once for that head, as the sweeps say it, not once for every batch, which under traffic flooded the log."""
    ws = await sealed_log(client, factory, db, calls=4)
    await _cut_tail_and_rebuild_head(db, ws.org.id, keep=2)
    with caplog.at_level(logging.ERROR, logger="prism.ledger"):
        for _ in range(4):
            answer = await client.post(PARTS, json={}, headers=ws.headers())
            assert answer.status_code == 200, answer.text
    said = [r.getMessage() for r in caplog.records if ws.org.id in r.getMessage() and r.name == "prism.ledger"]
    # PostgreSQL's batches may leave the entries to the sealer's sweep, which says it at most once too.
    assert len(said) == 1 if db.is_sqlite else len(said) <= 1, said
