"""Group commit for the audit ledger.

Every dispatch appends one ledger entry before the door answers, and a write handler's changes must
commit in the same transaction as its entry. Doing that one transaction per request would cap a
process at what one serialized writer can commit per second. Instead, each process has one writer
task: requests queue their units, and the writer runs whatever has queued up in ONE transaction —
each write handler inside its own SAVEPOINT, so a refused call rolls back only its own changes and
still gets its "refused" entry — then commits once and answers every waiting request.

Heads of all organizations in a batch are locked up front in a fixed order (FOR UPDATE on
PostgreSQL; BEGIN IMMEDIATE on SQLite), so writers in other processes queue behind us instead of
forking a chain, and two processes can never deadlock on each other's heads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.db import Database
from prism.errors import Conflict, PrismError
from prism.governance.ledger import EntryDraft, audit_entries, audit_heads, chain_hash, entry_body
from prism.kit.prepared import Prepared

log = logging.getLogger("prism.ledger")

MAX_BATCH = 256
Work = Callable[[AsyncSession], Awaitable[Any]]
# Builds the entry once the outcome is known: (outcome, error code, HTTP status) -> draft.
DraftFor = Callable[[str, "str | None", int], EntryDraft]


class LedgerUnavailable(PrismError):
    code, status = "ledger_unavailable", 503


@dataclass(slots=True)
class _Unit:
    organization_id: str
    draft_for: DraftFor
    work: Work | None
    # A refusal decided before the unit was queued (e.g. permission denied): recorded as is.
    refusal: PrismError | None
    writes: bool = False
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class LedgerWriter:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._queue: list[_Unit] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def record(self, organization_id: str, draft_for: DraftFor, *, refusal: PrismError | None = None) -> None:
        """Append an entry for a call that has already run (or was refused before running)."""
        await self._submit(_Unit(organization_id, draft_for, None, refusal))

    async def run(self, organization_id: str, work: Work, draft_for: DraftFor, *, writes: bool = True) -> Any:
        """Run `work` in the ledger transaction and append its entry; re-raises its refusal after recording it.

        Work that `writes` runs inside a SAVEPOINT so that its refusal undoes only its own changes.
        """
        return await self._submit(_Unit(organization_id, draft_for, work, None, writes))

    async def _submit(self, unit: _Unit) -> Any:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="prism-ledger-writer")
        self._queue.append(unit)
        self._wakeup.set()
        return await unit.future

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            # One turn of the loop before draining lets requests that are already readable queue their
            # units too: bigger batches, fewer transactions, for the price of one loop iteration.
            await asyncio.sleep(0)
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                outcomes: list[tuple[Any, BaseException | None]] = []
                try:
                    outcomes = await self._commit(batch)
                except Exception as exc:
                    log.exception("ledger batch of %d failed", len(batch))
                    failure = LedgerUnavailable("the audit ledger could not be written; nothing was changed")
                    failure.__cause__ = exc
                    outcomes = [(None, failure)] * len(batch)
                for unit, (result, error) in zip(batch, outcomes, strict=True):
                    if unit.future.done():
                        continue
                    if error is None:
                        unit.future.set_result(result)
                    else:
                        unit.future.set_exception(error)

    async def _commit(self, batch: list[_Unit]) -> list[tuple[Any, BaseException | None]]:
        outcomes: list[tuple[Any, BaseException | None]] = []
        rows: list[dict[str, Any]] = []
        async with self.db.write() as session:
            heads = await _lock_heads(session, sorted({u.organization_id for u in batch}))
            locked = dict(heads)
            # On PostgreSQL any failed statement aborts the whole transaction, so even a read gets a
            # savepoint there; SQLite rolls back only the failed statement.
            isolate_reads = not self.db.is_sqlite
            for unit in batch:
                head = heads.get(unit.organization_id)
                if head is None:  # the organization is gone: nothing may run unaudited
                    outcomes.append((None, PrismError("organization has no audit chain",
                                                      code="organization_not_found", status=404)))
                    continue
                result, error = await _run_unit(session, unit, savepoint=unit.writes or isolate_reads)
                draft = (unit.draft_for("allowed", None, 200) if error is None else
                         unit.draft_for("refused", getattr(error, "code", "internal_error"),
                                        getattr(error, "status", 500)))
                seq = head[0] + 1
                body = entry_body(draft, seq)
                digest = chain_hash(head[1], body)
                rows.append({**body, "created_at": draft.created_at, "prev_hash": head[1], "hash": digest})
                heads[unit.organization_id] = (seq, digest)
                outcomes.append((result, error))
            await _INSERT_ENTRIES.execute_many(session, rows)
            await _MOVE_HEAD.execute_many(session, [
                {"org_id": org_id, "seq": seq, "hash": digest}
                for org_id, (seq, digest) in heads.items() if locked[org_id] != (seq, digest)])
        return outcomes


# The batch's statements run on the prepared path: they are executed once per batch, on every dispatch.
_LOCK_HEAD = Prepared(select(audit_heads.c.seq, audit_heads.c.hash)
                      .where(audit_heads.c.organization_id == bindparam("org_id")).with_for_update())
_INSERT_ENTRIES = Prepared(insert(audit_entries).values(
    {c.key: bindparam(c.key) for c in audit_entries.columns if c.key != "id"}))
_MOVE_HEAD = Prepared(update(audit_heads).where(audit_heads.c.organization_id == bindparam("org_id"))
                      .values(seq=bindparam("seq"), hash=bindparam("hash")))


async def _lock_heads(session: AsyncSession, organization_ids: list[str]) -> dict[str, tuple[int, str]]:
    """Lock each organization's head in a fixed (sorted) order, so concurrent writers cannot deadlock."""
    heads: dict[str, tuple[int, str]] = {}
    for org_id in organization_ids:
        row = await _LOCK_HEAD.fetch_one(session, org_id=org_id)
        if row is not None:
            heads[org_id] = (row["seq"], row["hash"])
    return heads


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
