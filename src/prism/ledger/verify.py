"""Verifying an organization's log: every entry against its hashes and MAC, the tree against its signed head.

    report = await verify_log(session, organization_id, keys)                  # from the first entry
    report = await verify_log(session, organization_id, keys, since=start)     # from a signed checkpoint on

What a database writer without the master secret cannot do unseen:
- alter an entry, even recomputing every hash after it: the entry's MAC no longer fits, and the tree no
  longer matches the signed head; the report names the entry;
- delete entries from the middle (a position is missing) or from the end, even with the head row rewritten
  to match: the head's signature no longer verifies, and a kept checkpoint larger than the log shows the
  cut; cutting exactly back to an earlier signed checkpoint is seen against any later checkpoint held
  outside the database (`trusted`, e.g. one a webhook receiver kept from an `audit.checkpoint` event);
- delete the whole log: the organization's head is gone, or its signature does not verify;
- put another organization's log in its place: MACs are keyed per organization and the signed head names it.

Entries written before the tree (a hash chain) are checked as they always were, and as leaves of the tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.ledger.checkpoints import UNSIGNED_HEAD_HINT, Checkpoint, MalformedCheckpoint, parse_checkpoint
from prism.ledger.entries import (
    GENESIS_HASH,
    audit_checkpoints,
    audit_entries,
    audit_heads,
    content_hash,
    content_of,
    legacy_chain_hash,
)
from prism.ledger.keys import LedgerKeys
from prism.ledger.merkle import Frontier, leaf_hash

PROGRESS_EVERY = 100_000


@dataclass(frozen=True)
class StartingPoint:
    """A signed checkpoint with the frontier of its tree: verification can continue from it."""

    checkpoint: Checkpoint
    frontier: list[str]


@dataclass(frozen=True)
class LogReport:
    organization_id: str
    valid: bool
    tree_size: int = 0
    # Entries checked (those after the starting checkpoint, if any), and committed entries not yet sealed.
    checked: int = 0
    waiting: int = 0
    since: int = 0
    first_broken_seq: int | None = None
    first_broken_id: str | None = None  # the entry's reference (LedgerKeys.entry_ref), as the API shows it
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"organization_id": self.organization_id, "valid": self.valid, "tree_size": self.tree_size,
                "checked": self.checked, "waiting": self.waiting, "since": self.since,
                "first_broken_seq": self.first_broken_seq, "first_broken_id": self.first_broken_id,
                "reason": self.reason}


class _Broken(Exception):
    def __init__(self, reason: str, seq: int | None = None, entry_id: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.seq, self.entry_id = reason, seq, entry_id


async def verify_log(session: AsyncSession, organization_id: str, keys: LedgerKeys, *,
                     since: StartingPoint | None = None, trusted: Checkpoint | None = None,
                     progress: Callable[[int], None] | None = None) -> LogReport:
    """Check the log; `since` starts from a checkpoint, `trusted` is one held outside the database.

    A transaction that does not read one snapshot (PostgreSQL's READ COMMITTED, the dispatcher's) sees a prune
    (`prism audit retain`) that commits while it reads: the entries it was about to read are gone, and the log
    would look cut. A broken report is therefore checked against the head once more: if the archived range moved
    meanwhile, the log is verified again from its new start (a few times at most), and only a log that is broken
    in one state is reported."""
    for _ in range(PRUNES_MET):
        report, pruned_through = await _verify_once(session, organization_id, keys, since=since, trusted=trusted,
                                                    progress=progress)
        if report.valid or await _pruned_through(session, organization_id) == pruned_through:
            return report
    return report


# How many prunes committing during one verification it starts again for: each runs for a whole retention
# range, so more than one in the time of one verification is an operator looping `retain`.
PRUNES_MET = 3


async def _pruned_through(session: AsyncSession, organization_id: str) -> int | None:
    pruned: int | None = (await session.execute(select(audit_heads.c.pruned_through).where(
        audit_heads.c.organization_id == organization_id))).scalar_one_or_none()
    return pruned


async def _verify_once(session: AsyncSession, organization_id: str, keys: LedgerKeys, *,
                       since: StartingPoint | None, trusted: Checkpoint | None,
                       progress: Callable[[int], None] | None) -> tuple[LogReport, int | None]:
    """The report, and the head's archived range it was made from (None: no head)."""
    checked = 0
    pruned_through: int | None = None
    try:
        head = await _head(session, organization_id)
        pruned_through = head.pruned_through
        # A head that does not match its signature is reported only if no entry is to blame first: an attacker
        # who rewrote an entry rewrote the head too, and the entry is what the report must name.
        head_problem = _signature_problem(head, organization_id, keys)
        await _nothing_before_the_log(session, organization_id)
        pruned = await _pruned_start(session, organization_id, head, keys)
        # A checkpoint older than the archived range starts nowhere readable: the archive's own one is signed too.
        start = pruned if since is None or (pruned is not None and since.checkpoint.tree_size
                                            < pruned.checkpoint.tree_size) else since
        if trusted is not None:
            _check_trusted(trusted, organization_id, keys)
            if start is not None and start.checkpoint.tree_size > trusted.tree_size:
                # A checkpoint held outside must be compared: start at or before it, never past it.
                start = await _start_at_or_before(session, organization_id, trusted.tree_size, pruned)
        frontier = _frontier_of(start, organization_id, keys) if start else Frontier()
        if frontier.size > head.tree_size:
            # A signed checkpoint of this log read before its head (an exported one, or the newest kept one): the
            # log can only have grown since, so it was cut back below it.
            raise _Broken(f"verification starts from a checkpoint of {frontier.size} entries, but the log has "
                          f"{head.tree_size}: entries {head.tree_size + 1}..{frontier.size} were removed",
                          head.tree_size + 1)
        await _entries_before_start_stored(session, organization_id, head.pruned_through, frontier.size)
        kept = await _kept_roots(session, organization_id, keys, after=frontier.size, through=head.tree_size)
        if trusted is not None:
            if trusted.tree_size == frontier.size and frontier.root().hex() != trusted.root:
                raise _Broken(f"the log's first {frontier.size} entries do not match the trusted checkpoint")
            kept[trusted.tree_size] = trusted.root
        last_chain_hash: str | None = GENESIS_HASH if frontier.size == 0 else None
        rows = await session.stream(
            select(audit_entries).where(audit_entries.c.organization_id == organization_id,
                                        audit_entries.c.seq > frontier.size, audit_entries.c.seq <= head.tree_size)
            .order_by(audit_entries.c.seq).execution_options(yield_per=2_000))
        after_the_chain = False
        async for row in rows:
            seq = frontier.size + 1
            if row.seq != seq:
                raise _Broken(f"entry {seq} is missing (found {row.seq} next)", seq, row.id)
            # Only the positions the hash chain had before the tree (the head's `seq`) may be chained entries:
            # anywhere else, an entry with a `prev_hash` would escape the MAC check. The head's `seq` is not
            # signed, so the chain is also held to what it was, a prefix of the log: an entry after one checked
            # by its MAC is checked by its MAC too, and a forged entry disguised as chained is named even when
            # the head's `seq` was raised over it.
            if row.prev_hash is not None and seq <= head.seq and not after_the_chain:
                last_chain_hash = _check_chained(row, last_chain_hash)
            else:
                _check_entry(row, organization_id, keys, seq)
                after_the_chain = True
            frontier.append(leaf_hash(seq, bytes.fromhex(row.entry_hash)))
            checked += 1
            root = kept.get(frontier.size)
            if root is not None and frontier.root().hex() != root:
                raise _Broken(f"the log's first {frontier.size} entries do not match the checkpoint of that size",
                              seq, row.id)
            if progress is not None and checked % PROGRESS_EVERY == 0:
                progress(checked)
        waiting = await _check_waiting(session, organization_id, keys)
        await _no_entry_twice(session, organization_id, start.checkpoint.tree_size if start else 0)
        if head_problem is not None:
            raise _Broken(head_problem)
        if frontier.size < head.tree_size:
            raise _Broken(f"entries {frontier.size + 1}..{head.tree_size} are missing from the end",
                          frontier.size + 1)
        if frontier.root().hex() != head.root:
            raise _Broken("the entries do not make the tree the signed head describes")
        await _nothing_beyond(session, organization_id, head.tree_size, trusted)
    except _Broken as broken:
        return LogReport(organization_id, False, checked=checked, since=since.checkpoint.tree_size if since else 0,
                         first_broken_seq=broken.seq,
                         first_broken_id=None if broken.entry_id is None else keys.entry_ref(organization_id,
                                                                                             broken.entry_id),
                         reason=broken.reason), pruned_through
    return LogReport(organization_id, True, head.tree_size, checked, waiting,
                     start.checkpoint.tree_size if start else 0), pruned_through


async def latest_kept(session: AsyncSession, organization_id: str) -> StartingPoint | None:
    """The newest checkpoint kept in the database, with its frontier: where a quick verification starts."""
    row = await _newest_kept(session, organization_id)
    if row is None:
        return None
    if not isinstance(row.frontier, list):
        raise MalformedCheckpoint("the newest kept checkpoint has no frontier")
    return StartingPoint(parse_checkpoint(row.checkpoint), list(row.frontier))


async def _head(session: AsyncSession, organization_id: str) -> Any:
    head = (await session.execute(select(audit_heads).where(
        audit_heads.c.organization_id == organization_id))).first()
    if head is None:
        raise _Broken("the organization's log has no head: the log was deleted")
    return head


def _signature_problem(head: Any, organization_id: str, keys: LedgerKeys) -> str | None:
    if head.checkpoint is None:
        return "the log's head is not signed: " + UNSIGNED_HEAD_HINT
    try:
        signed = parse_checkpoint(head.checkpoint)
    except MalformedCheckpoint as exc:
        return f"the log's head holds no valid checkpoint ({exc})"
    if not (signed.verifies(keys.public_key) and signed.organization_id == organization_id
            and signed.tree_size == head.tree_size and signed.root == head.root):
        return "the log's head does not match its signature: the head was rewritten"
    if not _makes_root(head.tree_size, head.frontier, head.root):
        # What the next seal extends: the sealer refuses such a head, so the log's entries would wait for ever.
        return "the log's head has a frontier that does not make its signed root: the head was rewritten"
    return None


async def _pruned_start(session: AsyncSession, organization_id: str, head: Any,
                        keys: LedgerKeys) -> StartingPoint | None:
    """Where a pruned log starts: the kept checkpoint of the archived range, as the prune attested it. Neither
    `pruned_through` nor a kept checkpoint's row says on its own that entries were archived: a database writer
    can copy the head's signed checkpoint into `audit_checkpoints`, delete the entries and set `pruned_through`.
    Only the prune's MAC (`pruned_mac`, the organization's key) binds the range to the checkpoint it starts
    from."""
    if not head.pruned_through:
        return None
    kept = (await session.execute(select(audit_checkpoints.c.checkpoint, audit_checkpoints.c.frontier).where(
        audit_checkpoints.c.organization_id == organization_id,
        audit_checkpoints.c.tree_size == head.pruned_through))).first()
    if kept is None:
        raise _Broken(f"entries 1..{head.pruned_through} were archived, but the checkpoint of that size is gone")
    # The prune deletes entries 1..N in the transaction that records N: one still stored there was put back, or
    # N was moved past it to hide it from verification.
    left = (await session.execute(select(audit_entries.c.seq, audit_entries.c.id).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq <= head.pruned_through)
        .order_by(audit_entries.c.seq).limit(1))).first()
    if left is not None:
        raise _Broken(f"entry {left.seq} is stored, but entries 1..{head.pruned_through} were archived and pruned: "
                      "the archived range was changed", left.seq, left.id)
    start = _starting_point(kept, "the checkpoint of the archived entries")
    if not (start.checkpoint.tree_size == head.pruned_through and keys.prune_mac_fits(
            organization_id, head.pruned_through, start.checkpoint.root, head.pruned_mac)):
        raise _Broken(f"entries 1..{head.pruned_through} are gone and the head says they were archived, but no "
                      "prune by this deployment attests it: the entries were deleted", 1)
    return start


async def _nothing_before_the_log(session: AsyncSession, organization_id: str) -> None:
    """A log's positions start at 1, and verification reads from there on; the entry list and export show every
    stored entry, so one stored at 0 or below (a copy, or a forged entry placed where no check reads) is named.
    Entries at archived positions (1..pruned_through) are `_pruned_start`'s to name."""
    outside = (await session.execute(select(audit_entries.c.seq, audit_entries.c.id).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq < 1)
        .order_by(audit_entries.c.seq).limit(1))).first()
    if outside is not None:
        raise _Broken(f"an entry is stored at position {outside.seq}, outside the log (its positions start at 1): "
                      "it was put there", outside.seq, outside.id)


async def _entries_before_start_stored(session: AsyncSession, organization_id: str, pruned_through: int,
                                       start: int) -> None:
    """A verification that starts from a checkpoint does not read the entries before it, so a log deleted up to
    it (or whole, from its head's checkpoint) would verify: the first and the last of those entries must be stored
    (two lookups). Entries deleted from their middle are found by a verification from the first entry."""
    if start <= pruned_through:
        return
    for seq in sorted({pruned_through + 1, start}):
        stored = (await session.execute(select(audit_entries.c.id).where(
            audit_entries.c.organization_id == organization_id, audit_entries.c.seq == seq))).first()
        if stored is None:
            raise _Broken(f"entry {seq} is missing: entries before the checkpoint verification starts from "
                          f"({start} entries) were deleted", seq)


async def _start_at_or_before(session: AsyncSession, organization_id: str, size: int,
                              pruned: StartingPoint | None) -> StartingPoint | None:
    """The newest kept checkpoint no larger than `size` (or the start of the log): where a verification that must
    reach a trusted checkpoint of that size begins. Entries archived past it cannot be read again here."""
    if pruned is not None and pruned.checkpoint.tree_size > size:
        raise CheckpointBeforeArchive(
            f"the checkpoint ({size} entries) is older than the archived entries (1..{pruned.checkpoint.tree_size}), "
            "which the database no longer holds, so it cannot be checked here: check the archive file that holds "
            f"entry {size} against it (`examples/ledger_verifier.py archive FILE --checkpoint CHECKPOINT`); the log "
            "itself verifies from its archived range on without it")
    kept = await _newest_kept(session, organization_id, at_most=size)
    return _starting_point(kept, "a kept checkpoint") if kept is not None else pruned


async def _newest_kept(session: AsyncSession, organization_id: str, *, at_most: int | None = None) -> Any:
    """The row (checkpoint text, frontier) of the newest kept checkpoint, of at most `at_most` entries if given."""
    stmt = select(audit_checkpoints.c.checkpoint, audit_checkpoints.c.frontier).where(
        audit_checkpoints.c.organization_id == organization_id)
    if at_most is not None:
        stmt = stmt.where(audit_checkpoints.c.tree_size <= at_most)
    return (await session.execute(stmt.order_by(audit_checkpoints.c.tree_size.desc()).limit(1))).first()


def _starting_point(kept: Any, what: str) -> StartingPoint:
    """A kept checkpoint's row as a starting point; one whose text or frontier was rewritten is a broken log."""
    try:
        frontier = list(kept.frontier)
        return StartingPoint(parse_checkpoint(kept.checkpoint), frontier)
    except (MalformedCheckpoint, TypeError) as exc:
        raise _Broken(f"{what} is not valid ({exc})") from exc


class UnusableStart(Exception):
    """A checkpoint to start from that is not a checkpoint this deployment signed with its tree's frontier."""


class CheckpointBeforeArchive(UnusableStart):
    """A trusted checkpoint older than the log's archived range: the entries it covers are in an archive file, not
    in the database, so it says nothing about the log the database holds (neither valid nor broken). The archive
    is checked against it (examples/ledger_verifier.py)."""


def starting_frontier(start: StartingPoint, keys: LedgerKeys, what: str) -> Frontier:
    """The tree to continue from: only a checkpoint this deployment's key signed, with a frontier that makes its
    root (the frontier is not signed: only that check ties it to the checkpoint). UnusableStart names what is
    wrong, `what` naming the checkpoint."""
    checkpoint = start.checkpoint
    if not checkpoint.verifies(keys.public_key):
        raise UnusableStart(f"{what} ({checkpoint.tree_size} entries) is not signed by this deployment's key")
    try:
        frontier = Frontier.from_hex(checkpoint.tree_size, start.frontier)
    except (ValueError, TypeError) as exc:  # not hex, or not text at all
        raise UnusableStart(f"{what}'s frontier is not valid ({exc})") from exc
    if frontier.root().hex() != checkpoint.root:
        raise UnusableStart(f"{what}'s frontier does not make its root")
    return frontier


def _frontier_of(start: StartingPoint, organization_id: str, keys: LedgerKeys) -> Frontier:
    """Where verification starts, kept in the database or given by the caller (`prism audit verify --since` checks
    a file with `starting_frontier` first, so that a bad file is a bad argument, not a broken log)."""
    if start.checkpoint.organization_id != organization_id:
        raise _Broken(f"the starting checkpoint ({start.checkpoint.tree_size} entries) is not signed for this log")
    try:
        return starting_frontier(start, keys, "the starting checkpoint")
    except UnusableStart as exc:
        raise _Broken(str(exc)) from exc


def _check_trusted(trusted: Checkpoint, organization_id: str, keys: LedgerKeys) -> None:
    if trusted.organization_id != organization_id:
        raise _Broken(f"the trusted checkpoint is for another log ({trusted.origin})")
    if not trusted.verifies(keys.public_key):
        raise _Broken("the trusted checkpoint's signature does not verify with this deployment's key")


async def _kept_roots(session: AsyncSession, organization_id: str, keys: LedgerKeys, *, after: int,
                      through: int) -> dict[int, str]:
    """The roots of the kept checkpoints in the range, each only as its signed text states it and with a frontier
    that makes that root: an archive takes its header from the kept checkpoint of its size and a prune keeps it
    as where verification starts (as does `--since latest`), so a rewritten one must not pass as the root alone
    fits."""
    rows = await session.execute(select(
        audit_checkpoints.c.tree_size, audit_checkpoints.c.root, audit_checkpoints.c.checkpoint,
        audit_checkpoints.c.frontier).where(
        audit_checkpoints.c.organization_id == organization_id, audit_checkpoints.c.tree_size > after,
        audit_checkpoints.c.tree_size <= through))
    kept: dict[int, str] = {}
    for size, root, text, frontier in rows:
        try:
            signed = parse_checkpoint(text)
        except MalformedCheckpoint as exc:
            raise _Broken(f"the kept checkpoint of {size} entries is not valid ({exc})") from None
        if not (signed.tree_size == size and signed.root == root and signed.organization_id == organization_id
                and signed.verifies(keys.public_key)):
            raise _Broken(f"the kept checkpoint of {size} entries does not match its signature: it was rewritten")
        if not _makes_root(size, frontier, root):
            raise _Broken(f"the kept checkpoint of {size} entries has a frontier that does not make its root: it "
                          "was rewritten")
        kept[size] = root
    return kept


def _makes_root(size: int, frontier: Any, root: str) -> bool:
    try:
        return Frontier.from_hex(size, frontier).root().hex() == root
    except (ValueError, TypeError):  # not a list of hex strings of the right length
        return False


async def _nothing_beyond(session: AsyncSession, organization_id: str, size: int, trusted: Checkpoint | None) -> None:
    """No entry and no checkpoint lies beyond the head that was verified — unless a seal committed meanwhile.

    The log is checked up to the head read when verification began. On PostgreSQL a running server goes on
    sealing (each statement of a READ COMMITTED transaction sees what has committed since), so what lies beyond
    is compared with the head as it is now, read after it: a seal commits its entries, checkpoint and head
    together, so growth is never mistaken for a cut log.
    """
    last_entry = (await session.execute(select(func.max(audit_entries.c.seq)).where(
        audit_entries.c.organization_id == organization_id))).scalar() or 0
    last_kept = (await session.execute(select(func.max(audit_checkpoints.c.tree_size)).where(
        audit_checkpoints.c.organization_id == organization_id))).scalar() or 0
    trusted_size = trusted.tree_size if trusted is not None else 0
    if max(last_entry, last_kept, trusted_size) <= size:
        return
    now = (await session.execute(select(audit_heads.c.tree_size).where(
        audit_heads.c.organization_id == organization_id))).scalar() or 0
    if last_entry > now:
        raise _Broken(f"entries {size + 1}..{last_entry} lie beyond the signed head", size + 1)
    cut = max(last_kept, trusted_size)
    if cut > now:
        raise _Broken(f"a checkpoint of {cut} entries exists, but the log has {size}: entries {size + 1}..{cut} "
                      "were removed", size + 1)
    if trusted_size > size:  # the log grew to it while being verified: its root was not compared
        raise _Broken(f"the trusted checkpoint ({trusted_size} entries) is newer than the head verified ({size}); "
                      "verify again")


def _check_chained(row: Any, previous: str | None) -> str:
    if previous is not None and row.prev_hash != previous:
        raise _Broken("prev_hash does not match the previous entry's hash", row.seq, row.id)
    if legacy_chain_hash(row.prev_hash, content_of(row), row.seq) != row.hash or row.entry_hash != row.hash:
        raise _Broken("contents do not match the entry's hash", row.seq, row.id)
    return str(row.hash)


def _check_entry(row: Any, organization_id: str, keys: LedgerKeys, seq: int) -> None:
    """An entry's content against its hash, and its hash and position against its MAC (seq 0: waiting)."""
    if content_hash(content_of(row)) != row.entry_hash:
        raise _Broken("contents do not match the entry's hash", row.seq, row.id)
    if not keys.mac_fits(organization_id, seq, row.entry_hash, row.mac):
        raise _Broken("the entry's MAC does not match: it was rewritten or moved, or belongs to another log",
                      row.seq, row.id)


async def _check_waiting(session: AsyncSession, organization_id: str, keys: LedgerKeys) -> int:
    """Entries not yet sealed: content against hash, and hash and row id against MAC (a copied row has another
    id, two swapped rows each the other's)."""
    rows = await session.stream(select(audit_entries).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq.is_(None))
        .order_by(audit_entries.c.id))
    count = 0
    async for row in rows:
        if content_hash(content_of(row)) != row.entry_hash:
            raise _Broken("contents do not match the entry's hash", None, row.id)
        if not keys.waiting_mac_fits(organization_id, row.id, row.entry_hash, row.mac):
            raise _Broken("the waiting entry's MAC does not match: it was copied, moved or rewritten, or belongs to "
                          "another log", None, row.id)
        count += 1
    return count


async def _no_entry_twice(session: AsyncSession, organization_id: str, after: int) -> None:
    """Every entry of a log has a content hash of its own (the writer tells identical calls of a batch apart), so
    two with one hash are a copy: among the entries verified and those waiting."""
    twice = (await session.execute(
        select(audit_entries.c.entry_hash, func.min(audit_entries.c.seq), func.max(audit_entries.c.id)).where(
            audit_entries.c.organization_id == organization_id,
            or_(audit_entries.c.seq > after, audit_entries.c.seq.is_(None)))
        .group_by(audit_entries.c.entry_hash).having(func.count() > 1).limit(1))).first()
    if twice is not None:
        raise _Broken(f"two entries have the content hash {twice[0]}: one is a copy", twice[1], twice[2])
