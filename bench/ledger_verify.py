"""Verifying a long audit log from a kept checkpoint against verifying it whole.

    python bench/ledger_verify.py                                  # SQLite file, 1,000,000 entries
    python bench/ledger_verify.py --entries 200000 --new 10000
    python bench/ledger_verify.py --database-url postgresql://postgres@127.0.0.1:5432/prism_bench_ledger

Builds one organization's log of `--entries` sealed entries: `--entries - --new` written directly with their
positions (the writer's hashing, the sealer's MAC and Frontier, bulk inserts: what sealing produces, faster),
a checkpoint kept at that size as the sealer keeps them, then `--new` entries written waiting and sealed by
`seal_all`, as a running server does. Then times `verify_log` from the kept checkpoint and from the first entry
(both must report the log valid) and prints a Markdown table. The PostgreSQL database is created and dropped
(its name must start with prism_bench).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update

from bench.harness import machine, write_result
from bench.pgdb import throwaway_database
from prism.config import Settings
from prism.kit.timeutil import iso, utcnow
from prism.ledger.checkpoints import parse_checkpoint, sign_checkpoint
from prism.ledger.entries import EntryDraft, audit_checkpoints, audit_entries, audit_heads, content_hash, content_of
from prism.ledger.keys import LedgerKeys
from prism.ledger.merkle import Frontier, leaf_hash
from prism.ledger.sealer import seal_all
from prism.ledger.verify import StartingPoint, verify_log
from prism.migrate import upgrade
from prism.storage import Database, normalize_url
from prism.tenancy.service import create_organization, create_tenant

BATCH = 10_000
OUTCOMES = [("allowed", None)] * 8 + [("refused", "permission_denied"), ("refused", "invalid_arguments")]
OPERATIONS = ("read", "list", "create")


def entries(organization_id: str, tenant_id: str, count: int, start: int) -> Iterator[EntryDraft]:
    """Entries like a dispatcher's: several tools and operations, refusals among them, a small detail."""
    at = utcnow()
    for number in range(start, start + count):
        outcome, error = OUTCOMES[number % len(OUTCOMES)]
        yield EntryDraft(organization_id, tenant_id, at, f"user-{number % 37:04d}", f"key-{number % 53:04d}", "rest",
                         "prism_entity_crud", f"entity_crud/spare_parts/spare_part/{OPERATIONS[number % 3]}",
                         f"{number:064x}", outcome, error,
                         {"status": 200 if error is None else 403, "cost": (number % 100) / 1000, "ms": number % 17})


async def write_sealed(db: Database, keys: LedgerKeys, organization_id: str, tenant_id: str, count: int) -> Frontier:
    """`count` entries with their positions and MACs, as sealing leaves them, and the head to match."""
    tree = Frontier()
    for start in range(0, count, BATCH):
        rows = []
        for draft in entries(organization_id, tenant_id, min(BATCH, count - start), start):
            row = content_of(draft)
            digest = content_hash(row)
            seq = tree.size + 1
            tree.append(leaf_hash(seq, bytes.fromhex(digest)))
            rows.append({**row, "created_at": draft.created_at, "seq": seq, "entry_hash": digest,
                         "mac": keys.mac(organization_id, seq, digest)})
        async with db.write() as session:
            await session.execute(insert(audit_entries), rows)
    at = utcnow()
    checkpoint = sign_checkpoint(keys, organization_id, tree.size, tree.root().hex(), iso(at))
    async with db.write() as session:
        await session.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id).values(
            tree_size=tree.size, root=checkpoint.root, frontier=tree.to_hex(), checkpoint=checkpoint.to_json(),
            sealed_at=at, checkpointed_at=at))
        await session.execute(insert(audit_checkpoints).values(
            organization_id=organization_id, tree_size=tree.size, root=checkpoint.root, frontier=tree.to_hex(),
            checkpoint=checkpoint.to_json(), created_at=at))
    return tree


async def write_waiting(db: Database, keys: LedgerKeys, organization_id: str, tenant_id: str, count: int,
                        start: int) -> None:
    """`count` entries as the ledger writer writes them: no position yet, MAC at position 0."""
    rows = []
    for draft in entries(organization_id, tenant_id, count, start):
        row = content_of(draft)
        digest = content_hash(row)
        rows.append({**row, "created_at": draft.created_at, "entry_hash": digest,
                     "mac": keys.mac(organization_id, 0, digest)})
    async with db.write() as session:
        await session.execute(insert(audit_entries), rows)


async def timed_verify(db: Database, organization_id: str, keys: LedgerKeys,
                       since: StartingPoint | None) -> tuple[float, Any]:
    start = time.perf_counter()
    async with db.read() as session:
        report = await verify_log(session, organization_id, keys, since=since)
    elapsed = time.perf_counter() - start
    if not report.valid:
        raise SystemExit(f"the benchmark's log does not verify: {report.reason}")
    return elapsed, report


async def run(url: str, total: int, new: int, secret_file: Path) -> dict[str, Any]:
    keys = LedgerKeys(Settings(secret_key_file=str(secret_file)))
    db = Database(url)
    try:
        async with db.write() as session:
            tenant = await create_tenant(session, "ledgerbench", name="Ledger benchmark")
            org = await create_organization(session, tenant, name="Ledger benchmark", keys=keys)
            organization_id, tenant_id = org.id, tenant.id
        began = time.perf_counter()
        await write_sealed(db, keys, organization_id, tenant_id, total - new)
        built = time.perf_counter() - began
        async with db.read() as session:
            kept = (await session.execute(select(audit_checkpoints.c.checkpoint, audit_checkpoints.c.frontier).where(
                audit_checkpoints.c.organization_id == organization_id))).one()
        since = StartingPoint(parse_checkpoint(kept.checkpoint), list(kept.frontier))
        await write_waiting(db, keys, organization_id, tenant_id, new, total - new)
        began = time.perf_counter()
        sealed = await seal_all(db, [organization_id], keys, checkpoint_every=3600)
        seal_seconds = time.perf_counter() - began
        assert sealed == new, sealed
        from_checkpoint, report = await timed_verify(db, organization_id, keys, since)
        assert (report.checked, report.tree_size) == (new, total), report
        whole, report = await timed_verify(db, organization_id, keys, None)
        assert report.checked == total, report
    finally:
        await db.dispose()
    return {"entries": total, "checkpoint_at": total - new, "new": new, "build_seconds": round(built, 1),
            "seal_new_seconds": round(seal_seconds, 3), "verify_from_checkpoint_seconds": round(from_checkpoint, 3),
            "verify_whole_seconds": round(whole, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--new", type=int, default=10_000, help="entries after the kept checkpoint")
    parser.add_argument("--database-url", help="PostgreSQL (a throwaway prism_bench* database); default SQLite")
    args = parser.parse_args()
    if not 0 < args.new < args.entries:
        parser.error("--new must be between 1 and --entries - 1")
    with tempfile.TemporaryDirectory(prefix="prism-ledger-bench-") as scratch, contextlib.ExitStack() as stack:
        if args.database_url:
            stack.enter_context(throwaway_database(args.database_url))
            url, engine = args.database_url, "PostgreSQL"
        else:
            url, engine = f"sqlite:///{scratch}/ledger.db", "SQLite"
        upgrade(url)
        result = asyncio.run(run(normalize_url(url), args.entries, args.new, Path(scratch) / "secret.key"))
    result = {"engine": engine, **result}
    path = write_result(f"ledger_verify_{engine.lower()}_{args.entries}", {**result, "machine": machine()})
    print(f"| engine | entries | kept checkpoint at | build | seal {result['new']:,} new | verify from the checkpoint "
          "| verify whole log |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {engine} | {result['entries']:,} | {result['checkpoint_at']:,} | {result['build_seconds']} s "
          f"| {result['seal_new_seconds']} s | {result['verify_from_checkpoint_seconds']} s "
          f"| {result['verify_whole_seconds']} s |")
    print(f"\n(raw: {path})")


if __name__ == "__main__":
    main()
