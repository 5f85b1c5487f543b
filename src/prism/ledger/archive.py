"""Archiving an organization's oldest entries to a file, and pruning them from the database.

    result = await archive(session, organization_id, keys, through=n, out=path, prune=True)

The file is JSON Lines: a header, then one line per entry (its hashed content, `seq`, `entry_hash`, `mac`).
The header holds the signed checkpoint of the tree of exactly the first `n` entries and its frontier, and, when
earlier entries were archived before, the stored checkpoint (with frontier) the file continues from: the file
checks on its own with the public key (`examples/ledger_verifier.py archive`).

Pruning, in the caller's transaction: keep that checkpoint in `audit_checkpoints`, set the head's
`pruned_through` to `n` with the MAC that attests it (`pruned_mac`: `n` and that checkpoint's root, under the
organization's key), and delete entries 1..n; verification then starts from that checkpoint
(prism.ledger.verify). The file is complete on disk before anything is deleted. A log that does not verify is
never archived: its evidence would be deleted with it.

Retention (`retention_cut`) picks `n` for an organization: its last entry older than its retention.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import InvalidArguments, PrismError
from prism.kit.timeutil import iso, utcnow
from prism.ledger.checkpoints import (
    UNSIGNED_HEAD_HINT,
    Checkpoint,
    MalformedCheckpoint,
    parse_checkpoint,
    sign_checkpoint,
)
from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.ledger.keys import LedgerKeys
from prism.ledger.merkle import Frontier, leaf_hash
from prism.ledger.proofs import entry_document
from prism.ledger.verify import StartingPoint, verify_log

ARCHIVE_FORMAT = "prism.audit.archive/1"


class ArchiveRefused(PrismError):
    code, status = "archive_refused", 409


@dataclass(frozen=True)
class ArchiveResult:
    organization_id: str
    first_seq: int
    last_seq: int
    path: Path
    pruned: bool
    checkpoint: Checkpoint

    def as_dict(self) -> dict[str, Any]:
        return {"organization_id": self.organization_id, "first_seq": self.first_seq, "last_seq": self.last_seq,
                "entries": self.last_seq - self.first_seq + 1, "file": str(self.path), "pruned": self.pruned,
                "checkpoint": self.checkpoint.as_dict()}


def archive_name(organization_id: str, first_seq: int, last_seq: int) -> str:
    return f"audit-{organization_id}-{first_seq}-{last_seq}.jsonl"


async def archive(session: AsyncSession, organization_id: str, keys: LedgerKeys, *, through: int, out: Path,
                  prune: bool) -> ArchiveResult:
    """Write entries (pruned_through, through] to `out`; with `prune`, delete them in `session`'s transaction."""
    head = (await session.execute(
        select(audit_heads).where(audit_heads.c.organization_id == organization_id)
        .with_for_update(key_share=True))).first()  # the lock the sealer takes: no entry is sealed meanwhile
    if head is None or head.checkpoint is None:
        raise ArchiveRefused("this organization's log has no signed head: " + UNSIGNED_HEAD_HINT,
                             code="checkpoint_not_found")
    first = head.pruned_through + 1
    _check_range(through, first, head.tree_size)
    await _check_nothing_waiting(session, organization_id, through)
    report = await verify_log(session, organization_id, keys)
    if not report.valid:
        raise ArchiveRefused(f"the log does not verify ({report.reason}); nothing was archived: run `prism audit "
                             "verify`", code="log_broken")
    start = await _stored(session, organization_id, head.pruned_through) if head.pruned_through else None
    tree = Frontier.from_hex(start.checkpoint.tree_size, start.frontier) if start else Frontier()
    _refuse_existing(out)
    body = out.with_name(out.name + ".partial")
    try:
        with _created(body) as lines:
            await _write_entries(session, organization_id, through, tree, lines)
        stored = await _stored(session, organization_id, through)
        checkpoint = stored.checkpoint if stored else sign_checkpoint(
            keys, organization_id, through, tree.root().hex(), iso(utcnow()))
        if checkpoint.root != tree.root().hex():
            raise ArchiveRefused(f"the kept checkpoint of {through} entries does not match them", code="log_broken")
        header = {"format": ARCHIVE_FORMAT, "organization_id": organization_id, "first_seq": first,
                  "last_seq": through, "checkpoint": checkpoint.as_dict(), "frontier": tree.to_hex(),
                  "start": {"checkpoint": start.checkpoint.as_dict(), "frontier": start.frontier} if start else None}
        _finish(out, header, body)
    except OSError as exc:  # the file system's: a disk full or gone, a name too long, a directory removed
        raise _not_writable(out, exc) from exc
    finally:
        with contextlib.suppress(OSError):  # a name the file system refused was never created
            body.unlink(missing_ok=True)
    if prune:
        await _prune(session, organization_id, keys, through, tree, checkpoint, keep=stored is None)
    return ArchiveResult(organization_id, first, through, out, prune, checkpoint)


async def retention_cut(session: AsyncSession, organization_id: str, days: int, now: datetime | None = None) -> int:
    """The position of the organization's last sealed entry older than `days` (0: none)."""
    before = (now or utcnow()) - timedelta(days=days)
    last = (await session.execute(select(func.max(audit_entries.c.seq)).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq.is_not(None),
        audit_entries.c.created_at < before))).scalar()
    return int(last or 0)


def _check_range(through: int, first: int, tree_size: int) -> None:
    if through < 1:
        raise InvalidArguments("through is a position in the log, from 1", field="through")
    if through > tree_size:
        raise InvalidArguments(f"the log has {tree_size} sealed entries; cannot archive through {through}",
                               code="beyond_log")
    if through < first:
        raise InvalidArguments(f"entries 1..{first - 1} are archived already; archive through more than "
                               f"{first - 1}", code="already_archived")


async def _check_nothing_waiting(session: AsyncSession, organization_id: str, through: int) -> None:
    """Entries written before the last archived one but not sealed yet would be left behind, out of order."""
    last_at = (await session.execute(select(audit_entries.c.created_at).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq == through))).scalar()
    if last_at is None:
        return  # the entry is missing: verification names it
    waiting = (await session.execute(select(func.count()).select_from(audit_entries).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq.is_(None),
        audit_entries.c.created_at <= last_at))).scalar_one()
    if waiting:
        raise ArchiveRefused(f"{waiting} entries written before entry {through} are not sealed yet; run "
                             "`prism audit seal` first", code="entries_unsealed")


async def _stored(session: AsyncSession, organization_id: str, tree_size: int) -> StartingPoint | None:
    row = (await session.execute(select(audit_checkpoints.c.checkpoint, audit_checkpoints.c.frontier).where(
        audit_checkpoints.c.organization_id == organization_id,
        audit_checkpoints.c.tree_size == tree_size))).first()
    if row is None:
        return None
    try:  # verified with the log a moment ago; its frontier is read here first
        return StartingPoint(parse_checkpoint(row.checkpoint), list(row.frontier))
    except (MalformedCheckpoint, TypeError) as exc:
        raise ArchiveRefused(f"the kept checkpoint of {tree_size} entries is not valid ({exc})",
                             code="log_broken") from None


async def _write_entries(session: AsyncSession, organization_id: str, through: int, tree: Frontier,
                         lines: IO[bytes]) -> None:
    rows = await session.stream(
        select(audit_entries).where(audit_entries.c.organization_id == organization_id,
                                    audit_entries.c.seq > tree.size, audit_entries.c.seq <= through)
        .order_by(audit_entries.c.seq).execution_options(yield_per=2_000))
    async for row in rows:
        if row.seq != tree.size + 1:  # verified a moment ago in this transaction: cannot happen, never archived
            raise ArchiveRefused(f"entry {tree.size + 1} is missing", code="log_broken")
        tree.append(leaf_hash(row.seq, bytes.fromhex(row.entry_hash)))
        lines.write(orjson.dumps({**entry_document(row), "mac": row.mac}) + b"\n")
    if tree.size != through:
        raise ArchiveRefused(f"entries {tree.size + 1}..{through} are missing", code="log_broken")


def _refuse_existing(out: Path) -> None:
    try:
        exists = out.exists()
    except OSError as exc:  # a name too long, say: Path.exists() answers False only for a missing file
        raise _not_writable(out, exc) from exc
    if exists:
        raise ArchiveRefused(f"{out} exists; an archive is never overwritten", code="archive_exists")


def _created(path: Path) -> IO[bytes]:
    try:
        return path.open("xb")
    except OSError as exc:
        raise _not_writable(path, exc) from exc


def _not_writable(path: Path, exc: OSError) -> ArchiveRefused:
    return ArchiveRefused(f"cannot write {path}: {exc.strerror or exc}", code="archive_not_writable")


def _finish(out: Path, header: dict[str, Any], body: Path) -> None:
    """The header, then the entries, flushed to disk before the file takes its name (and before any delete)."""
    partial = out.with_name(out.name + ".writing")
    try:
        with _created(partial) as target, body.open("rb") as entries:
            target.write(orjson.dumps(header) + b"\n")
            while chunk := entries.read(1 << 20):
                target.write(chunk)
            target.flush()
            os.fsync(target.fileno())
        _take_name(partial, out)
        _sync_directory(out.parent)  # the name itself on disk before the prune commits
    finally:
        partial.unlink(missing_ok=True)


def _take_name(partial: Path, out: Path) -> None:
    """`partial` under the name `out`, never replacing a file that took that name since it was checked: a hard
    link fails if the name exists (a rename would replace it). A file system without hard links gets the rename."""
    try:
        os.link(partial, out)
    except FileExistsError:
        raise ArchiveRefused(f"{out} exists; an archive is never overwritten", code="archive_exists") from None
    except OSError:
        _refuse_existing(out)
        partial.rename(out)


def _sync_directory(directory: Path) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform that cannot open a directory: nothing more to do
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


async def _prune(session: AsyncSession, organization_id: str, keys: LedgerKeys, through: int, tree: Frontier,
                 checkpoint: Checkpoint, *, keep: bool) -> None:
    if keep:
        await session.execute(insert(audit_checkpoints).values(
            organization_id=organization_id, tree_size=through, root=checkpoint.root, frontier=tree.to_hex(),
            checkpoint=checkpoint.to_json(), created_at=utcnow()))
    # Attested with the organization's key: only a prune says entries 1..through were archived (verify.py).
    await session.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id)
                          .values(pruned_through=through,
                                  pruned_mac=keys.prune_mac(organization_id, through, checkpoint.root)))
    await session.execute(delete(audit_entries).where(audit_entries.c.organization_id == organization_id,
                                                      audit_entries.c.seq <= through))
