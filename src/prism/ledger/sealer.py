"""Sealing: committed entries get their positions and join the organization's signed Merkle tree.

A call's transaction writes its entry without a position, so calls never wait for each other to extend a log.
Sealing then takes the organization's head row (the only row two sealers can wait on), gives the waiting
entries the next positions in the order of their ids, appends their leaves to the tree's frontier, and stores
the new root with its signed checkpoint. A checkpoint is also kept in `audit_checkpoints` and sent as an
`audit.checkpoint` event at most once per `audit_checkpoint_interval_seconds`; a log that grew after its last
kept checkpoint and then went quiet has its head's checkpoint kept and sent once that interval has passed
(`keep_due_checkpoints`), so its last entries never wait for the next call to be attested outside.

Where it runs:
- SQLite has one writer at a time: the ledger batch already holds the database's write lock, so it seals in
  its own transaction (`seal_written`: its entries are inserted with their positions) and an entry is sealed
  when its call answers.
- PostgreSQL: several batches (lanes, processes) are in flight at once. At its end, a batch takes the heads
  that no other transaction holds (`free_heads`, which never waits) and seals its own entries as SQLite does;
  the entries of an organization whose head was held are written waiting, and this process's `Sealer` task
  seals them in a transaction of its own just after the batch commits. Every process also sweeps for entries
  left waiting (a process that stopped between commit and seal) every `audit_seal_sweep_seconds`.
Either way an entry is in the database, with its content hash and MAC, before its call answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import String, any_, bindparam, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from prism.events.outbox import emit
from prism.kit.timeutil import iso, utcnow
from prism.ledger.checkpoints import Checkpoint, MalformedCheckpoint, parse_checkpoint, sign_checkpoint
from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.ledger.keys import LedgerKeys
from prism.ledger.merkle import EMPTY_ROOT, Frontier, leaf_hash
from prism.models import Organization
from prism.observability.metrics import LEDGER_ENTRIES_SEALED
from prism.storage import Database
from prism.storage.prepared import PreparedRead, PreparedWrite
from prism.webhooks.matching import subscribed_organizations

log = logging.getLogger("prism.ledger")

# Entries sealed per transaction; a longer backlog is sealed in several.
SEAL_LIMIT = 10_000
ENTRY_CREATED = "audit.entry_created"
CHECKPOINT = "audit.checkpoint"


class BrokenLog(Exception):
    """The stored log does not continue where its head says it ends: nothing more is sealed onto it. `head` is that
    head as stored (`_as_stored`), set where the head was read (`_extending`), for `BrokenHeads`."""

    head: tuple[Any, ...] | None = None


@contextlib.contextmanager
def _extending(head: Any) -> Iterator[None]:
    """A BrokenLog raised while extending `head` carries it, so that a sweep knows which head it found broken."""
    try:
        yield
    except BrokenLog as broken:
        broken.head = _as_stored(head)
        raise


class BrokenHeads:
    """The logs this process found it cannot extend, each with its head as it was then.

    Such a log stays as it is, with entries waiting and a checkpoint due, until someone repairs it, so each sweep
    (about once a second) would find it again: a write transaction and an error line a second, for ever, and each
    batch of calls to that organization an error line more. Both
    sweeps (`seal_all`, `keep_due_checkpoints`) skip a log whose head is still the one found broken, without a
    write transaction or a line; a head that changed in any stored field is tried again, so a new break is
    logged and a repaired log is sealed. A log that is later extended or checkpointed is forgotten, so the same
    break made again afterwards is logged again. Per process: every start logs each broken log once.
    """

    def __init__(self) -> None:
        self._heads: dict[str, tuple[Any, ...]] = {}

    def known(self, head: Any) -> bool:
        """Whether `head` (a head row) is exactly the one this process found broken."""
        return self._heads.get(head.organization_id) == _as_stored(head)

    def remembered(self, organization_ids: Iterable[str]) -> list[str]:
        return sorted(set(organization_ids) & self._heads.keys())

    def found(self, organization_id: str, broken: BrokenLog) -> bool:
        """Remember the broken head; whether it is news (not the head already found broken), to be logged."""
        news = broken.head is None or self._heads.get(organization_id) != broken.head
        if broken.head is not None:
            self._heads[organization_id] = broken.head
        return news

    def extended(self, organization_id: str) -> None:
        self._heads.pop(organization_id, None)


def empty_head(keys: LedgerKeys, organization_id: str) -> dict[str, Any]:
    """The head row's tree fields for a new organization: an empty tree, signed, so it cannot be forged later."""
    at = utcnow()
    checkpoint = sign_checkpoint(keys, organization_id, 0, EMPTY_ROOT.hex(), iso(at))
    return {"tree_size": 0, "root": EMPTY_ROOT.hex(), "frontier": [], "checkpoint": checkpoint.to_json(),
            "sealed_at": at}


async def seal(session: AsyncSession, organization_id: str, keys: LedgerKeys, *,
               checkpoint_every: float, sign_unsigned_heads: bool = False) -> int:
    """Seal up to SEAL_LIMIT of the organization's waiting entries in `session`'s transaction; how many it sealed.
    `sign_unsigned_heads`: only the upgrade from the hash chain gives a head its first signature (`prism migrate`)."""
    head = await _locked_head(session, organization_id)
    if head is None:
        return 0
    with _extending(head):
        frontier = await _trusted_frontier(session, keys, head, sign_unsigned=sign_unsigned_heads)
        waiting = [SimpleNamespace(**row) for row in await _WAITING.all(session, {"organization_id": organization_id})]
        if not waiting and frontier.size == head.tree_size and head.checkpoint is not None:
            return 0
        positions = []
        for entry in waiting:
            seq = frontier.size + 1
            frontier.append(leaf_hash(seq, _digest_of(organization_id, entry)))
            _check_waiting_mac(organization_id, keys, entry)
            positions.append({"entry_id": entry.id, "new_seq": seq,
                              "new_mac": keys.mac(organization_id, seq, entry.entry_hash)})
    await _SET_POSITION.run(session, positions)
    await _store_head(session, organization_id, keys, head, frontier, checkpoint_every)
    await _announce(session, organization_id, [
        (position["new_seq"], entry.entry_hash, entry.tenant_id, entry.coordinate, entry.outcome,
         entry.actor_user_id, entry.door) for entry, position in zip(waiting, positions, strict=True)])
    return len(positions)


async def seal_written(session: AsyncSession, organization_id: str, keys: LedgerKeys, entries: list[dict[str, Any]],
                       *, head: Any, checkpoint_every: float) -> None:
    """Seal entries this transaction is about to insert: they get their positions and MACs in place, so each is
    written once, sealed. `head` is the organization's head row, with attribute access, that no other transaction
    can move before this one ends: read by SQLite's ledger batch, which holds the database's only write lock
    (`head_of`), or locked by PostgreSQL's (`free_heads`)."""
    with _extending(head):
        frontier = await _trusted_frontier(session, keys, head, sign_unsigned=False)
    for entry in entries:
        seq = frontier.size + 1
        frontier.append(leaf_hash(seq, bytes.fromhex(entry["entry_hash"])))
        entry["seq"], entry["mac"] = seq, keys.mac(organization_id, seq, entry["entry_hash"])
    await _store_head(session, organization_id, keys, head, frontier, checkpoint_every)
    await _announce(session, organization_id, [
        (e["seq"], e["entry_hash"], e["tenant_id"], e["coordinate"], e["outcome"], e["actor_user_id"], e["door"])
        for e in entries])


def _check_waiting_mac(organization_id: str, keys: LedgerKeys, entry: Any) -> None:
    """A waiting entry is given a position only if its MAC fits it as written, content hash and row id: a row
    copied (another id), two swapped, or one altered while it waited is never sealed into the signed tree. Its log
    cannot be extended (the calls go on, their entries wait) until the row is dealt with; verification names it."""
    if not keys.waiting_mac_fits(organization_id, entry.id, entry.entry_hash, entry.mac):
        raise BrokenLog(f"organization {organization_id}: waiting entry {entry.id} does not fit its MAC (its content "
                        "hash and id): it was copied, moved or rewritten while it waited")


def _digest_of(organization_id: str, entry: Any) -> bytes:
    """A waiting entry's hash as bytes. One rewritten in the database so that it is not hex has no leaf: its log
    cannot be extended (BrokenLog, so that the other logs are still sealed), and verification names the entry."""
    try:
        return bytes.fromhex(entry.entry_hash)
    except (ValueError, TypeError):
        raise BrokenLog(f"organization {organization_id}: waiting entry {entry.id} has a hash that is not hex: it "
                        "was rewritten") from None


_MOVED = ("tree_size", "root", "frontier", "checkpoint", "sealed_at")
_MOVE_HEAD = PreparedWrite(update(audit_heads).where(
    audit_heads.c.organization_id == bindparam("head_organization_id")), column_keys=_MOVED)
_MOVE_HEAD_CHECKPOINTED = PreparedWrite(_MOVE_HEAD.stmt, column_keys=(*_MOVED, "checkpointed_at"))
_HEAD_ROW = select(audit_heads).where(audit_heads.c.organization_id == bindparam("organization_id"))
_HEAD = PreparedRead(_HEAD_ROW)
# FOR NO KEY UPDATE: entries' foreign keys never wait on it. Built once, as a statement per sealing costs ~30 µs.
_LOCKED_HEAD = _HEAD_ROW.with_for_update(key_share=True)
_FREE_HEADS = PreparedRead(
    select(audit_heads).where(audit_heads.c.organization_id == any_(bindparam("organization_ids",
                                                                             type_=postgresql.ARRAY(String))))
    .with_for_update(key_share=True, skip_locked=True))


async def head_of(session: AsyncSession, organization_id: str) -> SimpleNamespace | None:
    """The organization's head row (None: it has no log), read by SQLite's ledger batch, which holds the write
    lock, so nothing needs locking; attributes as on a row."""
    head = await _HEAD.one(session, {"organization_id": organization_id})
    return None if head is None else SimpleNamespace(**head)


async def free_heads(session: AsyncSession, organization_ids: list[str]) -> dict[str, SimpleNamespace]:
    """PostgreSQL: the heads of these organizations that no other transaction holds, locked until this one ends
    (FOR NO KEY UPDATE SKIP LOCKED, so it never waits); an organization missing from the answer has its head
    held by another batch or a sealer (or has no log)."""
    if not organization_ids:
        return {}
    rows = await _FREE_HEADS.all(session, {"organization_ids": organization_ids})
    return {row["organization_id"]: SimpleNamespace(**row) for row in rows}


async def _locked_head(session: AsyncSession, organization_id: str) -> Any:
    return (await session.execute(_LOCKED_HEAD, {"organization_id": organization_id})).first()


async def _trusted_frontier(session: AsyncSession, keys: LedgerKeys, head: Any, *, sign_unsigned: bool) -> Frontier:
    """The frontier to extend, from a head that is as this deployment's key signed it.

    Sealing signs whatever it extends. A head a database writer rewrote (cut back with its tree rebuilt from the
    public leaf hashes, rebuilt over a rewritten entry, stripped of its signature, moved back over stored
    entries) would come out of the next seal signed, and the rewrite would verify. So such a head is never
    extended: BrokenLog, the calls' entries stay waiting, and verification names what is wrong. A head read back
    exactly as this process last signed it is known to match its signature (`keys.signed_heads`); any other is
    checked in full, once per change, at the cost of one signature check and one query.
    """
    organization_id = head.organization_id
    if keys.signed_heads.get(organization_id) == _as_stored(head):
        return Frontier.from_hex(head.tree_size, head.frontier)
    if head.checkpoint is None:
        return await _unsigned_frontier(session, head, sign_unsigned)
    try:
        signed = parse_checkpoint(head.checkpoint)
    except MalformedCheckpoint as exc:
        raise BrokenLog(f"organization {organization_id}: its head holds no valid checkpoint ({exc})") from None
    if signed.key_id != keys.key_id:
        raise BrokenLog(f"organization {organization_id}: its log is signed with key {signed.key_id}, and this "
                        f"process's key is {keys.key_id}: every process of a deployment must share the master "
                        "secret (PRISM_SECRET_KEY); nothing is sealed here")
    if not (signed.organization_id == organization_id and signed.tree_size == head.tree_size
            and signed.root == head.root and head.seq <= head.tree_size and signed.verifies(keys.public_key)):
        raise BrokenLog(f"organization {organization_id}: its head does not match its signature: it was rewritten")
    try:
        frontier = Frontier.from_hex(head.tree_size, head.frontier or [])
    except (ValueError, TypeError) as exc:  # not hex, or not text at all
        raise BrokenLog(f"organization {organization_id}: its head's frontier is not valid ({exc})") from None
    if frontier.root().hex() != head.root:
        raise BrokenLog(f"organization {organization_id}: its head's frontier does not make its signed root")
    last = (await session.execute(_LAST_POSITION, {"organization_id": organization_id})).scalar() or 0
    if last > head.tree_size:
        raise BrokenLog(f"organization {organization_id}: entries up to {last} are stored beyond its signed head "
                        f"({head.tree_size}): the head was moved back")
    return frontier


async def _unsigned_frontier(session: AsyncSession, head: Any, sign_unsigned: bool) -> Frontier:
    """A head without a checkpoint is a log written before signed heads, which the upgrade from the hash chain
    signs for the first time (its chained entries become the tree's first leaves); at any other time it is a
    head whose signature was removed, and signing it would make whatever it now holds verify."""
    if not sign_unsigned or head.tree_size != 0:
        raise BrokenLog(f"organization {head.organization_id}: its head is not signed; only the upgrade from the "
                        "hash chain signs a head for the first time (`prism migrate`, or `prism audit seal "
                        "--sign-unsigned-heads` after an upgrade that stopped before sealing)")
    frontier = Frontier()
    await _add_chained_entries(session, head.organization_id, frontier, through=head.seq)
    return frontier


def _as_stored(head: Any) -> tuple[Any, ...]:
    frontier = head.frontier
    return (head.checkpoint, head.tree_size, head.root, tuple(frontier) if isinstance(frontier, list) else frontier,
            head.seq)


_LAST_POSITION = select(func.max(audit_entries.c.seq)).where(
    audit_entries.c.organization_id == bindparam("organization_id"))


async def _store_head(session: AsyncSession, organization_id: str, keys: LedgerKeys, head: Any, frontier: Frontier,
                      checkpoint_every: float) -> None:
    """The head moves to the tree's new size and root, signed; a checkpoint is kept and sent when one is due."""
    at = utcnow()
    root = frontier.root().hex()
    checkpoint = sign_checkpoint(keys, organization_id, frontier.size, root, iso(at))
    moved: dict[str, Any] = {"tree_size": frontier.size, "root": root, "frontier": frontier.to_hex(),
                             "checkpoint": checkpoint.to_json(), "sealed_at": at}
    due = head.checkpointed_at is None or (at - head.checkpointed_at).total_seconds() >= checkpoint_every
    if due and frontier.size > head.tree_size:
        moved["checkpointed_at"] = at
        await session.execute(insert(audit_checkpoints).values(
            organization_id=organization_id, tree_size=frontier.size, root=root, frontier=moved["frontier"],
            checkpoint=moved["checkpoint"], created_at=at))
        await _send_checkpoint(session, organization_id, checkpoint)
    moved["head_organization_id"] = organization_id
    await (_MOVE_HEAD_CHECKPOINTED if "checkpointed_at" in moved else _MOVE_HEAD).run(session, [moved])
    # Remembered before the commit: if it never commits, the head read next differs and is checked in full.
    keys.signed_heads[organization_id] = (moved["checkpoint"], frontier.size, root, tuple(moved["frontier"]),
                                          head.seq)


async def _send_checkpoint(session: AsyncSession, organization_id: str, checkpoint: Checkpoint) -> None:
    """`audit.checkpoint` with the checkpoint kept, for an organization with a webhook that lists it."""
    if organization_id in await subscribed_organizations(session, [organization_id], CHECKPOINT):
        tenant_id = (await session.execute(select(Organization.tenant_id).where(
            Organization.id == organization_id))).scalar_one()
        await emit(session, organization_id=organization_id, tenant_id=tenant_id, event_type=CHECKPOINT,
                   data=checkpoint.as_dict())


async def keep_due_checkpoints(db: Database, keys: LedgerKeys, *, checkpoint_every: float,
                               broken: BrokenHeads) -> int:
    """Keep (and send) the signed head of each log that grew after its last kept checkpoint, once that checkpoint
    is `checkpoint_every` old; how many were kept.

    A seal keeps a checkpoint only when one is due as it grows the log, so without this the entries sealed after
    the last kept checkpoint of a burst would be attested outside the database only at the next call, however
    long that takes: a log cut back to that checkpoint would verify against everything a receiver holds.

    A log whose head this process found rewritten stays due for ever: it is logged once and tried again only when
    its head changes, not on every sweep (`broken`, shared with `seal_all`)."""
    cutoff = utcnow() - timedelta(seconds=checkpoint_every)
    async with db.read() as session:
        grown = (await session.execute(select(audit_heads).where(
            audit_heads.c.checkpoint.is_not(None), audit_heads.c.checkpointed_at <= cutoff,
            audit_heads.c.sealed_at > audit_heads.c.checkpointed_at))).all()
    kept = 0
    for head in sorted(grown, key=lambda row: row.organization_id):
        if broken.known(head):
            continue
        try:
            async with db.write() as session:
                kept_here = await _keep_head_checkpoint(session, head.organization_id, keys, cutoff,
                                                        sqlite=db.is_sqlite)
            if kept_here:  # its head was checked (0: held by a seal, or no longer due)
                broken.extended(head.organization_id)
            kept += kept_here
        except BrokenLog as found:  # verification names what is wrong; the other logs' checkpoints are kept
            if broken.found(head.organization_id, found):
                log.error("the audit log's checkpoint cannot be kept: %s", found)
    return kept


async def _keep_head_checkpoint(session: AsyncSession, organization_id: str, keys: LedgerKeys, cutoff: Any, *,
                                sqlite: bool) -> int:
    # A head a batch or a sealer holds is growing: that seal keeps the checkpoint if one is due.
    head = (await head_of(session, organization_id) if sqlite else
            (await free_heads(session, [organization_id])).get(organization_id))
    if (head is None or head.checkpoint is None or head.checkpointed_at is None or head.sealed_at is None
            or head.checkpointed_at > cutoff or not head.sealed_at > head.checkpointed_at):
        return 0
    at = utcnow()
    with _extending(head):  # only a head as this deployment signed it
        await _trusted_frontier(session, keys, head, sign_unsigned=False)
        # A row of this size stored already (written outside Prism: a seal keeps its own as it marks the head)
        # must not stop the sweep for every other log: the same checkpoint is kept (and sent) as it is, another
        # one is named.
        stored = (await session.execute(select(audit_checkpoints.c.checkpoint).where(
            audit_checkpoints.c.organization_id == organization_id,
            audit_checkpoints.c.tree_size == head.tree_size))).scalar_one_or_none()
        if stored is not None and stored != head.checkpoint:
            raise BrokenLog(f"organization {organization_id}: another checkpoint of size {head.tree_size} than its "
                            "head's is stored: it was written outside Prism")
    if stored is None:
        await session.execute(insert(audit_checkpoints).values(
            organization_id=organization_id, tree_size=head.tree_size, root=head.root, frontier=head.frontier,
            checkpoint=head.checkpoint, created_at=at))
    await session.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id)
                          .values(checkpointed_at=at))
    await _send_checkpoint(session, organization_id, parse_checkpoint(head.checkpoint))
    return 1


async def _announce(session: AsyncSession, organization_id: str, sealed: list[tuple[Any, ...]]) -> None:
    """`audit.entry_created` for each sealed entry (seq, hash, tenant, coordinate, outcome, actor, door), only for
    an organization that subscribes: nobody else's outbox grows with every call."""
    if not sealed or organization_id not in await subscribed_organizations(session, [organization_id], ENTRY_CREATED):
        return
    for seq, entry_hash, tenant_id, coordinate, outcome, actor, door in sealed:
        await emit(session, organization_id=organization_id, tenant_id=tenant_id, event_type=ENTRY_CREATED, data={
            "seq": seq, "hash": entry_hash, "coordinate": coordinate, "outcome": outcome, "actor": actor,
            "door": door})


_SEALED_AFTER_COMMIT = LEDGER_ENTRIES_SEALED.labels("after_commit")
_SET_POSITION = PreparedWrite(update(audit_entries).where(audit_entries.c.id == bindparam("entry_id"))
                              .values(seq=bindparam("new_seq"), mac=bindparam("new_mac")))
_WAITING = PreparedRead(
    select(audit_entries.c.id, audit_entries.c.entry_hash, audit_entries.c.mac, audit_entries.c.tenant_id,
           audit_entries.c.coordinate, audit_entries.c.outcome, audit_entries.c.actor_user_id, audit_entries.c.door)
    .where(audit_entries.c.organization_id == bindparam("organization_id"), audit_entries.c.seq.is_(None))
    .order_by(audit_entries.c.id).limit(SEAL_LIMIT))


async def _add_chained_entries(session: AsyncSession, organization_id: str, frontier: Frontier, *,
                               through: int) -> None:
    rows = await session.stream(
        select(audit_entries.c.seq, audit_entries.c.entry_hash)
        .where(audit_entries.c.organization_id == organization_id, audit_entries.c.seq > frontier.size,
               audit_entries.c.seq <= through).order_by(audit_entries.c.seq))
    async for seq, entry_hash in rows:
        if seq != frontier.size + 1:
            raise BrokenLog(f"organization {organization_id}: chained entry {frontier.size + 1} is missing")
        frontier.append(leaf_hash(seq, bytes.fromhex(entry_hash)))
    if frontier.size != through:
        raise BrokenLog(f"organization {organization_id}: chained entries {frontier.size + 1}..{through} are missing")


async def seal_all(db: Database, organization_ids: Iterable[str], keys: LedgerKeys, *,
                   checkpoint_every: float, sign_unsigned_heads: bool = False,
                   broken: BrokenHeads | None = None) -> int:
    """Seal each organization's whole backlog, a transaction per SEAL_LIMIT entries; how many were sealed. A log that
    cannot be sealed (BrokenLog) is logged and left as it is; the others are still sealed. `broken`: the logs a
    running process found broken, skipped while their head stays as it was found (the sweep's), else none."""
    broken = BrokenHeads() if broken is None else broken
    organization_ids = set(organization_ids)
    total = 0
    for organization_id in sorted(organization_ids - await _still_broken(db, organization_ids, broken)):
        try:
            while True:
                async with db.write() as session:
                    sealed = await seal(session, organization_id, keys, checkpoint_every=checkpoint_every,
                                        sign_unsigned_heads=sign_unsigned_heads)
                _SEALED_AFTER_COMMIT.inc(sealed)
                total += sealed
                if sealed < SEAL_LIMIT:
                    break
            broken.extended(organization_id)
        except BrokenLog as found:  # that log stays as it is, for verification to name; the others are sealed
            if broken.found(organization_id, found):
                log.error("the audit log cannot be sealed: %s", found)
    return total


async def _still_broken(db: Database, organization_ids: set[str], broken: BrokenHeads) -> set[str]:
    """The organizations whose head is still the one found broken: one read, only when some were found broken."""
    remembered = broken.remembered(organization_ids)
    if not remembered:
        return set()
    async with db.read() as session:
        heads = (await session.execute(select(audit_heads).where(
            audit_heads.c.organization_id.in_(remembered)))).all()
    return {head.organization_id for head in heads if broken.known(head)}


async def logs_to_seal(db: Database, *, with_heads: bool) -> set[str]:
    """Organizations with entries waiting; `with_heads` adds heads not yet signed or behind their chain
    (logs written before the tree), which only an upgrade leaves."""
    async with db.read() as session:
        found = set((await session.execute(
            select(audit_entries.c.organization_id).where(audit_entries.c.seq.is_(None)).distinct())).scalars())
        if with_heads:
            found |= set((await session.execute(select(audit_heads.c.organization_id).where(or_(
                audit_heads.c.checkpoint.is_(None), audit_heads.c.tree_size < audit_heads.c.seq)))).scalars())
    return found


class Sealer:
    """This process's sealing task: on PostgreSQL it seals what its batches wrote and sweeps for what others left;
    on both engines its sweep keeps the checkpoints of logs that went quiet (keep_due_checkpoints)."""

    def __init__(self, db: Database, keys: LedgerKeys, *, checkpoint_every: float, sweep_every: float) -> None:
        self.db = db
        self.keys = keys
        self.checkpoint_every = checkpoint_every
        self.sweep_every = sweep_every
        self._pending: set[str] = set()
        # Logs whose head was found rewritten: skipped by both sweeps until their head changes, and logged once
        # by them and by the ledger writer's batches, which seal onto the same heads (LedgerWriter._seal_here).
        self.broken_heads = BrokenHeads()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def request(self, organization_ids: Iterable[str]) -> None:
        self._pending.update(organization_ids)
        self._wakeup.set()
        self.start()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="prism-ledger-sealer")

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        first = True
        clock = asyncio.get_running_loop().time
        next_sweep = clock()  # the first round sweeps at once
        while True:
            try:
                await self._woken(until=next_sweep)
                # Due by the clock, woken or not: a process whose batches keep requesting seals is woken before
                # every timeout, and would never seal what other processes left nor keep quiet logs' checkpoints.
                sweep = clock() >= next_sweep
                if sweep:
                    next_sweep = clock() + self.sweep_every
                    self._pending |= await logs_to_seal(self.db, with_heads=first)
                    first = False
                self._wakeup.clear()
                organizations, self._pending = self._pending, set()
                await seal_all(self.db, organizations, self.keys, checkpoint_every=self.checkpoint_every,
                               broken=self.broken_heads)
                if sweep:
                    await keep_due_checkpoints(self.db, self.keys, checkpoint_every=self.checkpoint_every,
                                               broken=self.broken_heads)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The entries stay committed and waiting; the next sweep seals them.
                log.exception("sealing the audit ledger failed; retrying in %.1f s", self.sweep_every)
                await asyncio.sleep(self.sweep_every)

    async def _woken(self, *, until: float) -> None:
        """Wait for a request, or until the loop's clock reaches `until` (when the next sweep is due)."""
        timeout = until - asyncio.get_running_loop().time()
        if timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=timeout)
