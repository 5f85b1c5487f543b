"""Group commit for the audit ledger.

Every dispatch writes one ledger entry before the door answers, and a write handler's changes must commit in
the same transaction as its entry. Doing that one transaction per request would cap a process at what one
serialized writer can commit per second. Instead, each process has writer tasks: requests queue their units,
and a writer runs whatever has queued up in ONE transaction — each write handler inside its own SAVEPOINT, so
a refused call rolls back only its own changes and still gets its "refused" entry — then commits once and
answers every waiting request.

No row is locked for the ledger that another call, lane or process would wait for (write handlers of one
organization still take turns, see `_take_turn_to_write`). Positions and the signed tree come from sealing
(prism.ledger.sealer), in the batch's own transaction: on SQLite, which has one writer anyway, always; on
PostgreSQL, where several lanes (transactions) run at once so one lane's round trips overlap another's, for
each organization whose head no other transaction holds at the batch's end. Another organization's entries
are written with their content hash and MAC but without a position, and sealed just after the commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.config import Settings
from prism.errors import Conflict, PrismError
from prism.kit.timeutil import iso, utcnow
from prism.ledger.entries import WRITTEN_COLUMNS, EntryDraft, audit_entries, audit_heads, content_hash, content_of
from prism.ledger.keys import LedgerKeys
from prism.ledger.sealer import BrokenLog, Sealer, free_heads, head_of, seal_written
from prism.models import Organization
from prism.observability.metrics import LEDGER_BATCH_SIZE, LEDGER_COMMIT_SECONDS, LEDGER_ENTRIES_SEALED
from prism.storage import Database, unavailable_error
from prism.storage.prepared import PreparedWrite

log = logging.getLogger("prism.ledger")

MAX_BATCH = 256
LANES = 4
Work = Callable[[AsyncSession], Awaitable[Any]]
# Builds the entry once the outcome is known: (appended at, outcome, error code, HTTP status) -> draft.
DraftFor = Callable[[datetime, str, "str | None", int], EntryDraft]
# Runs after the unit (outside its savepoint, in the batch's transaction) with the unit's error, if any:
# what must be written whatever the outcome (a governance decision, an oversight request) commits with
# the entry. If it fails, the whole batch fails and nothing is changed.
Finish = Callable[[AsyncSession, "BaseException | None"], Awaitable[None]]


class _ReadAborted(Exception):
    """A read failed inside the database and took the batch's transaction with it: run the batch again."""


class _FinishFailed(Exception):
    """A unit's `finish` raised: the batch's transaction cannot go on (a failed flush ends it). The batch runs again
    with that call refused as it stands, so that no call can fail the others of its batch."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class LedgerUnavailable(PrismError):
    code, status = "ledger_unavailable", 503


class FinishFailed(PrismError):
    """What a call answers when what its governance must record with it (a decision, an oversight request) could
    not be written: it is refused, and recorded as refused; the other calls of its batch are not touched."""

    code, status = "internal_error", 500

    def __init__(self) -> None:
        super().__init__("the call's governance record could not be written; nothing was changed")


@dataclass(slots=True)
class _Unit:
    organization_id: str
    draft_for: DraftFor
    work: Work | None
    # A refusal decided before the unit was queued (e.g. permission denied): recorded as is.
    refusal: PrismError | None
    writes: bool = False
    finish: Finish | None = None
    future: asyncio.Future[Any] = field(init=False)  # made by `_submit`, on the writers' loop


class LedgerWriter:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.keys = LedgerKeys(settings)
        self.checkpoint_every = settings.audit_checkpoint_interval_seconds
        self.sealer = Sealer(db, self.keys, checkpoint_every=self.checkpoint_every,
                             sweep_every=settings.audit_seal_sweep_seconds)
        self._queue: list[_Unit] = []
        self._wakeup = asyncio.Event()
        # PostgreSQL: several transactions in flight, so one lane's round trips overlap another's.
        # SQLite has one writer at a time: one lane.
        self._lanes = 1 if db.is_sqlite else LANES
        self._tasks: list[asyncio.Task[None]] = []
        # The loop the writer tasks run on, kept rather than asked for per unit (bench/README.md says why).
        self._event_loop: asyncio.AbstractEventLoop | None = None

    # `record` and `run` queue the unit at once and hand back its future, which the caller awaits: no coroutine
    # of their own, as they run on every dispatch. (A caller cancelled while waiting cancels the future; the
    # writer then skips answering it, but the unit still runs and is recorded with its batch.)

    def record(self, organization_id: str, draft_for: DraftFor, *, refusal: PrismError | None = None,
               finish: Finish | None = None) -> Awaitable[None]:
        """Append an entry for a call that has already run (or was refused before running)."""
        return self._submit(_Unit(organization_id, draft_for, None, refusal, finish=finish))

    def run(self, organization_id: str, work: Work, draft_for: DraftFor, *, writes: bool = True,
            finish: Finish | None = None) -> Awaitable[Any]:
        """Run `work` in the ledger transaction and append its entry; re-raises its refusal after recording it.

        Work that `writes` runs inside a SAVEPOINT so that its refusal undoes only its own changes.
        """
        return self._submit(_Unit(organization_id, draft_for, work, None, writes, finish))

    def _submit(self, unit: _Unit) -> asyncio.Future[Any]:
        loop = self._event_loop
        if loop is None or len(self._tasks) < self._lanes or not _all_running(self._tasks):
            loop = self._start_writers()
        future = unit.future = loop.create_future()
        self._queue.append(unit)
        self._wakeup.set()
        return future

    def _start_writers(self) -> asyncio.AbstractEventLoop:
        """Start writer tasks on the running loop until there is one per lane (a crashed one is replaced)."""
        loop = self._event_loop = asyncio.get_running_loop()
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks += [loop.create_task(self._loop(), name="prism-ledger-writer")
                        for _ in range(self._lanes - len(self._tasks))]
        # The sealer's sweep also keeps the checkpoint of a log that went quiet (sealer.keep_due_checkpoints): on
        # SQLite too, where every entry is sealed with its call and nothing else starts it.
        self.sealer.start()
        return loop

    async def close(self) -> None:
        await self.sealer.close()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            while not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
            # One turn of the loop before draining lets requests that are already readable queue their
            # units too: bigger batches, fewer transactions, for the price of one loop iteration.
            await asyncio.sleep(0)
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                outcomes: list[tuple[Any, BaseException | None]] = []
                started = time.perf_counter()
                try:
                    outcomes = await self._commit_isolating_finishes(batch)
                except Exception as exc:
                    outcomes = [(None, _batch_failure(exc, len(batch)))] * len(batch)
                LEDGER_BATCH_SIZE.observe(len(batch))
                LEDGER_COMMIT_SECONDS.observe(time.perf_counter() - started)
                for unit, (result, error) in zip(batch, outcomes, strict=True):
                    if unit.future.done():
                        continue
                    if error is None:
                        unit.future.set_result(result)
                    else:
                        unit.future.set_exception(error)

    async def _commit_isolating_finishes(self, batch: list[_Unit]) -> list[tuple[Any, BaseException | None]]:
        """`_commit`, run again without what a failed `finish` would have written, for as long as one fails."""
        batch = list(batch)  # the caller's list keeps the units as submitted (their futures are answered from it)
        for _ in range(len(batch) + 1):
            try:
                try:
                    return await self._commit(batch, isolate_reads=False)
                except _ReadAborted:
                    return await self._commit(batch, isolate_reads=True)
            except _FinishFailed as failed:
                cause = failed.__cause__ if isinstance(failed.__cause__, Exception) else failed
                if unavailable_error(cause) is not None:  # the database, not the call: the whole batch waits
                    raise cause from None
                log.error("the governance record of one call could not be written; it is refused alone",
                          exc_info=cause)
                unit = batch[failed.index]
                refused = _Unit(unit.organization_id, unit.draft_for, None, FinishFailed(), writes=False)
                refused.future = unit.future
                batch[failed.index] = refused
        raise RuntimeError("every unit's finish failed")  # not reached: each round refuses one more unit

    async def _commit(self, batch: list[_Unit], *, isolate_reads: bool) -> list[tuple[Any, BaseException | None]]:
        outcomes: dict[int, tuple[Any, BaseException | None]] = {}
        async with self.db.write() as session:
            # The transaction begins before any unit runs: not getting the database (no pool connection in time,
            # SQLite's write lock held elsewhere past the busy timeout) fails the batch, not its first handler.
            await session.connection()
            # The logs first: a unit of an organization without one does not run at all.
            organizations = {u.organization_id for u in batch}
            heads: dict[str, Any] = {}
            if self.db.is_sqlite:  # the heads, which sealing here needs anyway, say which logs exist
                heads = {org: head for org in organizations if (head := await head_of(session, org)) is not None}
                logs = set(heads)
            else:
                logs = await _existing_logs(session, organizations)
            # On PostgreSQL a failed statement aborts the whole transaction: reads run without a savepoint (two
            # round trips fewer each), and if one fails in the database, the batch is rolled back and run again
            # with every unit isolated. SQLite rolls back only the statement.
            replay_on_failure = not self.db.is_sqlite and not isolate_reads
            for i, unit in enumerate(batch):
                if unit.work is not None and not unit.writes and unit.organization_id in logs:
                    outcome = outcomes[i] = await _run_unit(session, unit, savepoint=isolate_reads)
                    if replay_on_failure and isinstance(outcome[1], DBAPIError):
                        raise _ReadAborted from outcome[1]
            if not self.db.is_sqlite:  # SQLite's BEGIN IMMEDIATE already lets one writer in at a time
                await _take_turn_to_write(session, {u.organization_id for u in batch if u.work and u.writes})
            # One time for the batch's entries, which are committed together: its texts (hashed and stored) are
            # then made once per batch rather than once per entry.
            appended_at = utcnow()
            appended_iso = iso(appended_at)
            batch_nonce = secrets.token_hex(8)
            rows: list[dict[str, Any]] = []
            for i, unit in enumerate(batch):
                if unit.organization_id not in logs:  # the organization is gone: nothing may run unaudited
                    outcomes[i] = (None, PrismError("organization has no audit chain",
                                                    code="organization_not_found", status=404))
                    continue
                if i not in outcomes:
                    outcomes[i] = await _run_unit(session, unit, savepoint=unit.writes)
                error = outcomes[i][1]
                if unit.finish is not None:
                    try:
                        await unit.finish(session, error)
                    except Exception as exc:
                        raise _FinishFailed(i) from exc
                draft = (unit.draft_for(appended_at, "allowed", None, 200) if error is None else
                         unit.draft_for(appended_at, "refused", getattr(error, "code", "internal_error"),
                                        getattr(error, "status", 500)))
                # Identical calls (one time, caller, tool, arguments, outcome and request id: a client may send its
                # own X-Request-ID twice) would otherwise be entries with one content hash, in one batch or in two
                # processes' batches of one microsecond, and verification takes two such entries for a copy.
                draft.detail = {**draft.detail, "nonce": f"{batch_nonce}{i:x}"}
                # The batch's ISO text is the draft's own only if the draft took the batch's time.
                row = content_of(draft, appended_iso if draft.created_at is appended_at else None)
                digest = content_hash(row)
                # The hashed content becomes the row: the column takes the datetime, not the hashed text.
                row.update(created_at=draft.created_at, entry_hash=digest, seq=None, mac=None)
                rows.append(row)
            if not self.db.is_sqlite:  # last, so that a head is held only for the batch's last round trips
                heads = await free_heads(session, sorted({row["organization_id"] for row in rows}))
            sealed, left_waiting = await self._seal_or_leave_waiting(session, rows, heads)
            # One executemany for the batch's entries (with their ids when some were left waiting).
            await (_INSERT_ENTRIES_WITH_IDS if rows and "id" in rows[0] else _INSERT_ENTRIES).run(session, rows)
        _SEALED_WITH_CALL.inc(sealed)
        if left_waiting:
            self.sealer.request(left_waiting)
        return [outcomes[i] for i in range(len(batch))]

    async def _seal_or_leave_waiting(self, session: AsyncSession, rows: list[dict[str, Any]],
                                     heads: dict[str, Any]) -> tuple[int, list[str]]:
        """Seal the entries of each organization whose head this transaction holds; the others' are written waiting.
        How many were sealed, and the organizations left to the sealer."""
        sealed, left_waiting, waiting = 0, [], []
        for organization_id in sorted({row["organization_id"] for row in rows}):
            entries = [row for row in rows if row["organization_id"] == organization_id]
            if organization_id not in heads:  # sealed after the commit
                waiting += entries
                left_waiting.append(organization_id)
            elif await self._seal_here(session, organization_id, heads[organization_id], entries):
                sealed += len(entries)  # each entry has its position and its position's MAC
            else:
                waiting += entries
        if waiting:
            await self._mac_as_waiting(session, rows, waiting)
        return sealed, left_waiting

    async def _mac_as_waiting(self, session: AsyncSession, rows: list[dict[str, Any]],
                              waiting: list[dict[str, Any]]) -> None:
        """The MAC of an entry not yet placed binds its row id: the order the sealer places it in, and unique, so a
        copied or swapped waiting row fits no MAC. The batch's rows are inserted in one statement, so all get their
        ids now (one round trip, only for a batch that leaves entries waiting)."""
        for row, entry_id in zip(rows, await reserve_entry_ids(session, len(rows)), strict=True):
            row["id"] = entry_id
        for entry in waiting:
            entry["mac"] = self.keys.waiting_mac(entry["organization_id"], entry["id"], entry["entry_hash"])

    async def _seal_here(self, session: AsyncSession, organization_id: str, head: Any,
                         entries: list[dict[str, Any]]) -> bool:
        """Whether the entries were sealed: a log that cannot be extended leaves them waiting."""
        try:  # BrokenLog comes before anything is written or any entry is given a position
            await seal_written(session, organization_id, self.keys, entries, head=head,
                               checkpoint_every=self.checkpoint_every)
        except BrokenLog as found:
            # A log whose stored entries do not continue its head cannot be extended; the calls are still recorded
            # (waiting, with their hashes and MACs), and `prism audit verify` names what is wrong. Said once per
            # head found broken, not once per batch of calls to it.
            if self.sealer.broken_heads.found(organization_id, found):
                log.error("the audit log of organization %s cannot be sealed: %s", organization_id, found)
            return False
        self.sealer.broken_heads.extended(organization_id)
        return True


async def _take_turn_to_write(session: AsyncSession, organization_ids: set[str]) -> None:
    """Write handlers of one organization take turns across lanes and processes, as they always have: a handler
    that reads a record and writes it back cannot lose a concurrent update, and two batches cannot deadlock on
    each other's rows. The organizations' rows are locked in one statement, in id order (FOR NO KEY UPDATE:
    inserts that reference an organization do not wait for it). Reads, and the ledger itself, never wait."""
    if organization_ids:
        await session.execute(_LOCK_ORGANIZATIONS, {"ids": list(organization_ids)})


async def _existing_logs(session: AsyncSession, organization_ids: set[str]) -> set[str]:
    """The organizations that still have a log (a head row): entries of any other would have nowhere to go."""
    rows = await session.execute(_HEADS_OF, {"ids": list(organization_ids)})
    return set(rows.scalars())


# Built once: building a statement and its cache key costs about 30 µs, once per batch (`expanding` lists).
_LOCK_ORGANIZATIONS = (select(Organization.id).where(Organization.id.in_(bindparam("ids", expanding=True)))
                       .order_by(Organization.id).with_for_update(key_share=True))
_HEADS_OF = select(audit_heads.c.organization_id).where(
    audit_heads.c.organization_id.in_(bindparam("ids", expanding=True)))


_SEALED_WITH_CALL = LEDGER_ENTRIES_SEALED.labels("with_call")
_INSERT_ENTRIES = PreparedWrite(insert(audit_entries), column_keys=WRITTEN_COLUMNS)
_INSERT_ENTRIES_WITH_IDS = PreparedWrite(insert(audit_entries), column_keys=("id", *WRITTEN_COLUMNS))
_NEXT_IDS = text("SELECT nextval(pg_get_serial_sequence('audit_entries', 'id')) FROM generate_series(1, :count)")
_LAST_ID = select(func.max(audit_entries.c.id))


async def reserve_entry_ids(session: AsyncSession, count: int) -> list[int]:
    """`count` new ids for entries this transaction inserts, in increasing order. PostgreSQL: from the column's
    sequence (never handed out twice). SQLite: after the largest, which no other transaction can take meanwhile
    (the batch holds the database's only write lock)."""
    if session.get_bind().dialect.name == "sqlite":
        last = (await session.execute(_LAST_ID)).scalar() or 0
        return list(range(last + 1, last + 1 + count))
    return sorted((await session.execute(_NEXT_IDS, {"count": count})).scalars())


def _all_running(tasks: list[asyncio.Task[None]]) -> bool:
    for task in tasks:
        if task.done():
            return False
    return True


def _batch_failure(exc: Exception, size: int) -> PrismError:
    """What every call of a failed batch answers: the database is busy (503, retry) or the ledger failed."""
    busy = unavailable_error(exc)
    if busy is not None:
        log.warning("ledger batch of %d waited too long for the database: %s", size, exc)
        return busy
    log.exception("ledger batch of %d failed", size, exc_info=exc)
    failure = LedgerUnavailable("the audit ledger could not be written; nothing was changed")
    failure.__cause__ = exc
    return failure


async def _run_unit(session: AsyncSession, unit: _Unit, *, savepoint: bool) -> tuple[Any, BaseException | None]:
    if unit.work is None:
        return None, unit.refusal
    try:
        if not savepoint:
            return await unit.work(session), None
        async with session.begin_nested():
            return await unit.work(session), None
    except PrismError as exc:
        return None, exc
    except IntegrityError:
        return None, Conflict("the change conflicts with an existing record")
    except Exception as exc:
        log.exception("handler failed")
        return None, exc
