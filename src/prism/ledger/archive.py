"""Archiving an organization's oldest entries to a file, and pruning them from the database.

    result = await archive(db, organization_id, keys, through=n, out=path, prune=True)

The file is JSON Lines: a header, then one line per entry (its hashed content, `seq`, `entry_hash`, `mac`).
The header holds the signed checkpoint of the tree of exactly the first `n` entries and its frontier, and, when
earlier entries were archived before, the stored checkpoint (with frontier) the file continues from: the file
checks on its own with the public key (`examples/ledger_verifier.py archive`).

The log is verified and the file written in a read transaction: nothing waits for them (a write transaction
would, on SQLite, hold up every writer of the deployment for as long as the whole log takes to verify). Pruning is
a write transaction of its own, after the file is complete on disk: keep that checkpoint in `audit_checkpoints`,
set the head's `pruned_through` to `n` with the MAC that attests it (`pruned_mac`: `n` and that checkpoint's
root, under the organization's key), and delete entries 1..n; verification then starts from that checkpoint
(prism.ledger.verify). The prune refuses if another archive was pruned meanwhile. A log that does not verify is
never archived: its evidence would be deleted with it.

An archive is never overwritten. A file already there under the name is taken as this archive only if it is one:
the same range, the same entries byte for byte, and a checkpoint signed by this deployment over them (a run
stopped between writing the file and its prune left it; the next run prunes behind it).

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
from prism.storage import Database

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


@dataclass(frozen=True)
class _Written:
    first: int
    tree: Frontier  # of entries 1..through
    checkpoint: Checkpoint  # the file's


async def archive(db: Database, organization_id: str, keys: LedgerKeys, *, through: int, out: Path,
                  prune: bool) -> ArchiveResult:
    """Write entries (pruned_through, through] to `out`; with `prune`, then delete them from the database."""
    async with db.read() as session:
        written = await _write_file(session, organization_id, keys, through, out)
    if prune:
        async with db.write() as session:
            await _prune(session, organization_id, keys, through, written)
    return ArchiveResult(organization_id, written.first, through, out, prune, written.checkpoint)


async def _write_file(session: AsyncSession, organization_id: str, keys: LedgerKeys, through: int,
                      out: Path) -> _Written:
    head = (await session.execute(select(audit_heads).where(audit_heads.c.organization_id == organization_id))).first()
    if head is None or head.checkpoint is None:
        raise ArchiveRefused("this organization's log has no signed head: " + UNSIGNED_HEAD_HINT,
                             code="checkpoint_not_found")
    first = head.pruned_through + 1
    _check_range(through, first, head.tree_size)
    _refuse_other_file(out, organization_id, first, through)
    await _check_nothing_waiting(session, organization_id, through)
    report = await verify_log(session, organization_id, keys)
    if not report.valid:
        raise ArchiveRefused(f"the log does not verify ({report.reason}); nothing was archived: run `prism audit "
                             "verify`", code="log_broken")
    start = await _stored(session, organization_id, head.pruned_through) if head.pruned_through else None
    tree = Frontier.from_hex(start.checkpoint.tree_size, start.frontier) if start else Frontier()
    body = out.with_name(out.name + ".partial")
    try:
        with _created(body) as lines:
            try:
                await _write_entries(session, organization_id, through, tree, lines)
            except ArchiveRefused:
                # On PostgreSQL each statement reads the newest data: another archive's prune shows as a gap here.
                if await _pruned_through(session, organization_id) != head.pruned_through:
                    raise _raced() from None
                raise
        stored = await _stored(session, organization_id, through)
        checkpoint = stored.checkpoint if stored else sign_checkpoint(
            keys, organization_id, through, tree.root().hex(), iso(utcnow()))
        if checkpoint.root != tree.root().hex():
            raise ArchiveRefused(f"the kept checkpoint of {through} entries does not match them", code="log_broken")
        header = {"format": ARCHIVE_FORMAT, "organization_id": organization_id, "first_seq": first,
                  "last_seq": through, "checkpoint": checkpoint.as_dict(), "frontier": tree.to_hex(),
                  "start": {"checkpoint": start.checkpoint.as_dict(), "frontier": start.frontier} if start else None}
        already = _same_archive(out, header, body, keys)
        if already is None:
            _finish(out, header, body)
        else:
            checkpoint = already
    except OSError as exc:  # the file system's: a disk full or gone, a name too long, a directory removed
        raise _not_writable(out, exc) from exc
    finally:
        with contextlib.suppress(OSError):  # a name the file system refused was never created
            body.unlink(missing_ok=True)
    return _Written(first, tree, checkpoint)


async def retention_cut(session: AsyncSession, organization_id: str, days: int, now: datetime | None = None) -> int:
    """The position of the organization's last sealed entry older than `days` (0: none)."""
    before = (now or utcnow()) - timedelta(days=days)
    last = (await session.execute(select(func.max(audit_entries.c.seq)).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq.is_not(None),
        audit_entries.c.created_at < before))).scalar()
    return int(last or 0)


async def _pruned_through(session: AsyncSession, organization_id: str) -> int | None:
    return (await session.execute(select(audit_heads.c.pruned_through).where(
        audit_heads.c.organization_id == organization_id))).scalar()


def _raced() -> ArchiveRefused:
    return ArchiveRefused("another archive of this log was pruned while this one was written; nothing was pruned "
                          "(a file written stays): run again", code="archive_raced")


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
    if _exists(out):
        raise ArchiveRefused(f"{out} exists; an archive is never overwritten", code="archive_exists")


def _exists(out: Path) -> bool:
    try:
        return out.exists()
    except OSError as exc:  # a name too long, say: Path.exists() answers False only for a missing file
        raise _not_writable(out, exc) from exc


def _header_of(path: Path) -> dict[str, Any] | None:
    """An archive file's header, or None for a file that does not start with one."""
    try:
        with path.open("rb") as file:
            header = orjson.loads(file.readline())
    except (OSError, orjson.JSONDecodeError):
        return None
    return header if isinstance(header, dict) and header.get("format") == ARCHIVE_FORMAT else None


def _refuse_other_file(out: Path, organization_id: str, first: int, through: int) -> None:
    """Before the log is read: a file under the name that is not even an archive of this range is refused now."""
    if not _exists(out):
        return
    header = _header_of(out)
    if header is None or (header.get("organization_id"), header.get("first_seq"), header.get("last_seq")) != (
            organization_id, first, through):
        _refuse_existing(out)


def _same_archive(out: Path, header: dict[str, Any], body: Path, keys: LedgerKeys) -> Checkpoint | None:
    """The checkpoint of the file already named `out` if it is this archive (module docstring), else None."""
    if not _exists(out):
        return None
    found = _header_of(out)
    if found is None or any(found.get(name) != header[name] for name in (
            "organization_id", "first_seq", "last_seq", "frontier", "start")):
        return None
    try:
        checkpoint = parse_checkpoint(found.get("checkpoint") or {})
    except MalformedCheckpoint:
        return None
    if not (checkpoint.verifies(keys.public_key) and checkpoint.organization_id == header["organization_id"]
            and checkpoint.tree_size == header["last_seq"] and checkpoint.root == header["checkpoint"]["root"]):
        return None
    with out.open("rb") as existing, body.open("rb") as entries:
        existing.readline()
        while True:
            chunk = entries.read(1 << 20)
            if existing.read(len(chunk) or 1) != chunk:
                return None
            if not chunk:
                return checkpoint


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


async def _prune(session: AsyncSession, organization_id: str, keys: LedgerKeys, through: int,
                 written: _Written) -> None:
    head = (await session.execute(
        select(audit_heads.c.pruned_through).where(audit_heads.c.organization_id == organization_id)
        .with_for_update(key_share=True))).first()  # the lock the sealer takes
    if head is None or head.pruned_through != written.first - 1:
        raise _raced()
    kept = await _stored(session, organization_id, through)
    if kept is None:
        await session.execute(insert(audit_checkpoints).values(
            organization_id=organization_id, tree_size=through, root=written.checkpoint.root,
            frontier=written.tree.to_hex(), checkpoint=written.checkpoint.to_json(), created_at=utcnow()))
    elif kept.checkpoint.root != written.checkpoint.root:
        raise ArchiveRefused(f"the kept checkpoint of {through} entries does not match them", code="log_broken")
    # Attested with the organization's key: only a prune says entries 1..through were archived (verify.py).
    await session.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id)
                          .values(pruned_through=through,
                                  pruned_mac=keys.prune_mac(organization_id, through, written.checkpoint.root)))
    await session.execute(delete(audit_entries).where(audit_entries.c.organization_id == organization_id,
                                                      audit_entries.c.seq <= through))
