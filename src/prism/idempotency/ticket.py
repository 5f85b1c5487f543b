"""A call that carries an Idempotency-Key, through its one ledger unit: claim the key, run or replay, keep the answer.

Everything happens in the ledger transaction of the call (prism.ledger.writer):

- `claim` (inside the unit's SAVEPOINT, before the handler) inserts the key's row, unanswered, unless the key has
  one; if it did, the call runs. Otherwise the row is read (an expired one is replaced, and the call runs). A row
  for another request: 409 idempotency_key_reused.
  A row with an answer: that answer is the outcome, and the handler does not run. A row without one: its
  call committed but its outbound part (registry.AfterCommit) is still running: 409 idempotency_key_in_progress.
- `finish` (after the unit, in the same transaction) keeps the answer: the data of a call that ran, or its
  refusal (any 4xx, and 202 oversight_required). The answer commits with the handler's writes and the audit
  entry, or none of them do. A 5xx is Prism's failure, not an answer: the unit's savepoint took the row with
  it and a retry runs the call. Nor is a refusal of the dispatcher's checks, before the call was admitted
  (`refused_by_the_checks`): nothing ran, and a retry is checked again.

Concurrent repeats of one call wait for the first (write handlers of an organization take turns, see
prism.ledger.writer) and then replay it. The same credential may act in several organizations (an OAuth grant),
which do not share a turn, so the row's insert skips a conflict (ON CONFLICT DO NOTHING, which on PostgreSQL
waits for the other transaction) and the row that won decides.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from prism.config import Settings
from prism.errors import PrismError
from prism.idempotency.answers import Replay, ReplayedRefusal, open_answer, seal_data, seal_refusal
from prism.idempotency.keys import IdempotencyKeyInProgress, IdempotencyKeyReused
from prism.idempotency.models import IdempotencyRecord
from prism.kit.timeutil import utcnow
from prism.storage import Database
from prism.storage.prepared import PreparedRead, PreparedWrite

if TYPE_CHECKING:
    from prism.auth.context import AuthContext
    from prism.ledger.entries import EntryDraft

log = logging.getLogger("prism.idempotency")

KEEP_FOR = timedelta(hours=24)
# Expired rows are deleted by the calls that carry keys: at most once per interval per process, a bounded batch.
PURGE_INTERVAL_SECONDS = 600.0
PURGE_BATCH = 1000
# A key's row found by `held` outlives at least this long: the unit that claims it comes well within it.
HELD_MARGIN = timedelta(seconds=60)
# What the doors answer for an exception that is not a PrismError (prism.edge.doors.Entrance).
_INTERNAL = PrismError("internal server error")



class IdempotencyKeys:
    """The keys of one process's dispatcher: tickets for keyed calls, and the purge of expired rows."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self._next_purge = 0.0

    def ticket(self, auth: AuthContext, key: str, fingerprint: str) -> Ticket:
        record_id = hashlib.sha256(f"{auth.credential_kind}\x1f{auth.credential_id}\x1f{key}".encode()).hexdigest()
        return Ticket(self, record_id, fingerprint)

    async def purge_now_and_then(self) -> None:
        now = time.monotonic()
        if now < self._next_purge:
            return
        self._next_purge = now + PURGE_INTERVAL_SECONDS
        try:
            await self.purge_expired()
        except Exception:  # the purge is housekeeping: the call it rode on goes ahead
            log.warning("could not purge expired idempotency keys", exc_info=True)

    async def purge_expired(self) -> int:
        expired = select(IdempotencyRecord.id).where(IdempotencyRecord.expires_at <= utcnow()).limit(PURGE_BATCH)
        async with self.db.write() as session:
            result = await session.execute(delete(IdempotencyRecord).where(IdempotencyRecord.id.in_(expired)))
        count: int = result.rowcount  # type: ignore[attr-defined]
        return count


class Ticket:
    __slots__ = ("answered", "checked", "claimed", "fingerprint", "keys", "record_id", "replay", "sealed_data")

    def __init__(self, keys: IdempotencyKeys, record_id: str, fingerprint: str) -> None:
        self.keys = keys
        self.record_id = record_id
        self.fingerprint = fingerprint
        self.claimed = False  # this call inserted the row: its answer is the key's
        self.answered = False  # the final answer of a call's outbound part is stored (`answer_with_record`)
        self.checked = True  # the call passed the dispatcher's checks: its outcome is the key's answer
        self.replay: Replay | ReplayedRefusal | None = None
        self.sealed_data: str | None = None

    async def claim(self, session: AsyncSession) -> Replay | ReplayedRefusal | None:
        """The stored outcome to replay, or None when this call holds the key and runs."""
        # A batch the ledger runs again starts from a clean slate.
        self.claimed, self.checked, self.replay, self.sealed_data = False, True, None, None
        # A new key is the common case: one statement claims it, and only a key in use is read.
        if await self._insert(session, status=None, answer=None):
            self.claimed = True
            return None
        row = await _ROW.one(session, {"record_id": self.record_id})
        now = utcnow()
        if row is not None and row["expires_at"] <= now:
            await session.execute(delete(_KEYS).where(_KEYS.c.id == self.record_id, _KEYS.c.expires_at <= now))
            if await self._insert(session, status=None, answer=None):
                self.claimed = True
                return None
            # another organization's call of this credential took the key first
            row = await _ROW.one(session, {"record_id": self.record_id})
        if row is None or row["fingerprint"] != self.fingerprint:
            raise IdempotencyKeyReused("this Idempotency-Key was used for another request (another body, tool, "
                                       "door or organization); send a new key for a new request")
        if row["status"] is None or row["answer"] is None:
            raise IdempotencyKeyInProgress("the call that first used this Idempotency-Key has not finished; "
                                           "retry in a moment to get its answer")
        self.replay = open_answer(self.keys.settings, self.record_id, row["status"], row["answer"])
        return self.replay

    def refused_by_the_checks(self) -> None:
        """The call was refused before it was admitted (the coordinate unknown, a scope, role or person missing,
        invalid arguments): nothing ran, so the key stays unused and a retry is checked again (Stripe keeps no
        result for a request that failed validation or authorization). A token granted the scope since, a role
        given the permission, or corrected arguments then run the call under the same key."""
        self.checked = False

    async def held(self) -> bool:
        """Whether the key already has a row that will not have expired when the call's unit claims it: that unit
        then replays the row's answer or refuses (in progress, reused), and never runs the handler. A row is
        only ever deleted once expired, so one that expires later than `HELD_MARGIN` from now is still there."""
        async with self.keys.db.read() as session:
            row = await _ROW.one(session, {"record_id": self.record_id})
        return row is not None and row["expires_at"] > utcnow() + HELD_MARGIN

    def ran(self, data: Any) -> None:
        """The handler's data, sealed inside its savepoint: data no door could send undoes the call (500)."""
        self.sealed_data = seal_data(self.keys.settings, self.record_id, data)

    async def finish(self, session: AsyncSession, error: BaseException | None) -> None:
        if not self.claimed:
            return  # a replay, or refused for the key itself: the row keeps the first call's answer
        if not self.checked:
            return  # refused by the checks: the unit's savepoint took the claimed row, and the key stays unused
        if error is None:
            if self.sealed_data is not None:  # else the answer comes after the commit (`complete`)
                await self._store(session, 200, self.sealed_data)
        elif isinstance(error, PrismError) and error.status < 500:
            # The unit's savepoint took the claimed row with it: the refusal is the key's answer.
            await self._insert(session, status=error.status,
                               answer=seal_refusal(self.keys.settings, self.record_id, error))

    async def answer_with_record(self, session: AsyncSession, outcome: Any) -> None:
        """The final answer of a call whose outbound part ran after its commit (its data, or the refusal its
        record wrote down), in the transaction that records that part: one transaction fewer than `complete`.
        An answer that cannot be stored costs only itself (`complete` then tries again): SQLite undoes just the
        statement that failed, while on PostgreSQL it would abort the whole transaction, so it runs in a
        SAVEPOINT there (which costs about as much as a transaction of its own does on SQLite)."""
        try:
            refused = outcome if isinstance(outcome, PrismError) else None
            status, sealed = self._final(None if refused else outcome, refused)
            if session.get_bind().dialect.name == "postgresql":
                async with session.begin_nested():
                    await self._store(session, status, sealed)
            else:
                await self._store(session, status, sealed)
        except Exception:
            log.warning("could not store the answer of idempotency key %s with its record", self.record_id,
                        exc_info=True)
            return
        self.answered = True

    async def complete(self, data: Any = None, error: BaseException | None = None) -> None:
        """The answer of a call whose outbound part ran after its commit, in a transaction of its own, unless it
        was stored with the part's record (`answer_with_record`).

        Whatever it is, even a failure, it is the key's answer: running the call again could send the outbound
        request twice. If it cannot be stored the key stays in progress until it expires.
        """
        if self.answered:
            return
        try:
            status, sealed = self._final(data, error)
        except Exception:  # an answer that cannot be sealed (nested past what JSON encodes): the caller got a 500
            status, sealed = self._final(None, _INTERNAL)
        try:
            async with self.keys.db.write() as session:
                await self._store(session, status, sealed)
        except Exception:
            log.warning("could not store the answer of idempotency key %s", self.record_id, exc_info=True)

    def _final(self, data: Any, error: BaseException | None) -> tuple[int, str]:
        settings = self.keys.settings
        if error is None:
            return 200, seal_data(settings, self.record_id, data)
        refusal = error if isinstance(error, PrismError) else _INTERNAL
        return refusal.status, seal_refusal(settings, self.record_id, refusal)

    async def _store(self, session: AsyncSession, status: int, sealed: str) -> None:
        """The key's answer, on its row while the row has none."""
        await _STORE.run(session, [{"record_id": self.record_id, "status": status, "answer": sealed}])

    def mark(self, draft: EntryDraft) -> EntryDraft:
        """The call's audit entry names the key's row; a replay's says so, with the status it replayed."""
        draft.detail["idempotency_key"] = self.record_id
        replay = self.replay
        if replay is not None:
            draft.outcome = "replayed"
            draft.error_code = replay.code if isinstance(replay, ReplayedRefusal) else None
            draft.detail.update(status=replay.status if isinstance(replay, ReplayedRefusal) else 200, cost=0)
        return draft

    async def _insert(self, session: AsyncSession, *, status: int | None, answer: str | None) -> bool:
        """Insert the key's row unless one exists; whether this call inserted it."""
        now = utcnow()
        claim = _CLAIM_POSTGRESQL if session.get_bind().dialect.name == "postgresql" else _CLAIM_SQLITE
        inserted = await claim.all(session, {"id": self.record_id, "fingerprint": self.fingerprint, "status": status,
                                             "answer": answer, "created_at": now, "expires_at": now + KEEP_FOR})
        return bool(inserted)


# On every keyed call's path, so prepared (prism.storage.prepared): through the ORM, reading the row, inserting it
# and storing the answer cost about 0.5 ms each (bench/README.md, "Idempotency keys").
_KEYS: Table = IdempotencyRecord.__table__  # type: ignore[assignment]
_ROW = PreparedRead(select(_KEYS.c.fingerprint, _KEYS.c.status, _KEYS.c.answer, _KEYS.c.expires_at)
                    .where(_KEYS.c.id == bindparam("record_id")))
_STORE = PreparedWrite(update(_KEYS).where(_KEYS.c.id == bindparam("record_id"), _KEYS.c.status.is_(None)),
                       column_keys=("status", "answer"))


def _claim(dialect: Any) -> PreparedRead:
    """The row inserted unless the key has one (ON CONFLICT DO NOTHING), RETURNING its id when it was."""
    columns = ("id", "fingerprint", "status", "answer", "created_at", "expires_at")
    return PreparedRead(dialect.insert(_KEYS).values({name: bindparam(name) for name in columns})
                        .on_conflict_do_nothing(index_elements=["id"]).returning(_KEYS.c.id))


_CLAIM_POSTGRESQL, _CLAIM_SQLITE = _claim(postgresql), _claim(sqlite)
