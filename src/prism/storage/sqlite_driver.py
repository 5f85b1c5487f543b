"""Prism's SQLite driver for SQLAlchemy's asyncio extension: statements run where they are issued, and only a
statement that SQLite makes wait for a lock, or that would hold the event loop for long, is sent to a thread.

Why not aiosqlite: aiosqlite runs every driver call on the connection's own thread, so each call is a hand-over
to that thread and back (a queue put, a thread wake-up, a loop wake-up). SQLAlchemy makes about four such calls
per statement, and on this project's 2-core VM each costs 20-150 µs of CPU, against about 1 µs for the
statement itself; a governed call's batch made two dozen of them (bench/README.md has the measurements).

What may wait, and where it waits:
- Every connection is opened with a busy timeout of zero, so SQLite never sleeps on the event loop: a statement
  that meets another connection's lock fails at once with SQLITE_BUSY, and is then run again on a thread of this
  module with the configured busy timeout, while the event loop goes on serving other requests. In practice
  that is a writer's ``BEGIN IMMEDIATE`` while another process (the CLI, `prism worker`, a second `prism serve`)
  holds the write lock; WAL readers never wait for writers.
- A read that takes long (a count over a large ledger, a report) would hold the loop for as long: a SELECT gets
  `INLINE_BUDGET_SECONDS` there (SQLite's progress handler stops it past them, which changes nothing), then runs
  again on a thread.
- A large write (an upload's thousands of postings rows) would hold the loop as long, but cannot get a read's
  budget: SQLite rolls back the whole transaction of a write it stops half-way. So the place is chosen before the
  write starts, from what it binds (`write_seconds`): one estimated past `INLINE_BUDGET_SECONDS` runs on a thread,
  as does the commit of a transaction that changed many rows, and a write its caller said may change many rows
  by a condition (prism.storage.sqlite.long_writes). Small writes stay on the loop: a ledger batch of 32 entries
  takes about 0.3 ms there, and a hand-over to a thread costs 150-220 µs of its own.
- Once ``BEGIN IMMEDIATE`` has succeeded, the transaction holds SQLite's only write lock: none of its statements
  and not its COMMIT can wait for another connection (in WAL mode a commit needs no further lock). With
  ``synchronous=NORMAL`` a commit appends to the WAL without fsync.
- Otherwise the slow part of a commit would be SQLite's automatic checkpoint (copying the WAL into the database
  file, with two fsyncs: 5-8 ms here), so it is off, and every `CHECKPOINT_EVERY_COMMITS` commits that wrote (or
  `CHECKPOINT_EVERY_ROWS` rows changed) the driver runs a PASSIVE checkpoint on a thread, on the connection that
  committed, before handing it back.
- Opening a connection (it may wait for a lock while setting WAL) also runs on a thread.

Everything here uses public names: the standard library's sqlite3 and threads; SQLAlchemy's dialect registry, its
pysqlite dialect and the adapter bases its own asyncio dialects (aiosqlite, asyncpg) are built on.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, TypeVar

from sqlalchemy import pool
from sqlalchemy.connectors.asyncio import (
    AsyncAdapt_dbapi_connection,
    AsyncAdapt_dbapi_cursor,
    AsyncAdapt_dbapi_ss_cursor,
)
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteExecutionContext_aiosqlite
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine.url import URL
from sqlalchemy.util import await_

T = TypeVar("T")
IsolationLevel = Literal["DEFERRED", "EXCLUSIVE", "IMMEDIATE"] | None  # None: Prism emits its own BEGIN

DRIVER = "prism"
# A read runs on the event loop for at most this long; a longer one (a count over a big ledger, a report) is
# stopped and run again on a thread. SQLite calls the check every this many virtual-machine instructions
# (a read by key takes about a hundred).
INLINE_BUDGET_SECONDS = 0.002
PROGRESS_EVERY_INSTRUCTIONS = 1_000
# SQLite's automatic checkpoint would run inside a commit on the event loop (a copy of ~1,000 pages and two fsyncs,
# 5-8 ms here), so it is off; the driver runs a PASSIVE checkpoint on a thread once an engine's connections have
# committed this many writing transactions or changed this many rows since the last one (SQLite cannot tell
# Python how many pages its WAL holds; a batch of calls writes a few pages to a few dozen).
CHECKPOINT_EVERY_COMMITS = 64
CHECKPOINT_EVERY_ROWS = 1_000
# What a write is estimated to take on the loop, from what it binds (measured here, bench/README.md "Large writes
# off the loop"): a row costs 6-27 µs (indexed inserts; a ledger batch's rows 9 µs), and each byte of its values
# 2-6 ns more. A commit appends the pages its transaction still holds to the WAL: about 5 µs a changed row (a
# ledger batch's), though never more than a full page cache (20,000 postings rows committed in 8-11 ms).
WRITE_ROW_SECONDS = 10e-6
WRITE_BYTE_SECONDS = 5e-9
COMMIT_ROW_SECONDS = 5e-6
PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "wal_autocheckpoint=0")


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or one of its extended codes (the low byte is the primary code)."""
    return _primary_code(exc) == sqlite3.SQLITE_BUSY


def is_interrupted(exc: sqlite3.Error) -> bool:
    return _primary_code(exc) == sqlite3.SQLITE_INTERRUPT


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def only_reads(sql: str) -> bool:
    """A SELECT: stopping it half-way changes nothing (a write stopped inside a transaction would roll it back)."""
    return sql.lstrip()[:6].upper() == "SELECT"


def write_seconds(rows: Iterable[Any]) -> float:
    """How long a write with these rows of parameters is estimated to take on the loop: per row, a base cost and
    the size of its values (the first row's, taken for every row's: reading every value would cost as much as the
    write). Rows that cannot be counted (an iterator) are taken as long. What a statement does beyond the rows it
    binds (an UPDATE or DELETE by a condition) cannot be known before it runs: it counts as one row, unless its
    caller says otherwise (prism.storage.long_writes)."""
    if not isinstance(rows, Sequence):
        return math.inf
    if not rows:
        return 0.0
    first = rows[0]
    values = first.values() if isinstance(first, Mapping) else first if isinstance(first, Sequence) else ()
    size = sum(len(value) if isinstance(value, str | bytes | bytearray | memoryview) else 8 for value in values)
    return len(rows) * (WRITE_ROW_SECONDS + size * WRITE_BYTE_SECONDS)


async def on_waiting_thread(fn: Callable[[], T]) -> T:
    """`fn` on a thread of its own, which ends with it, so no idle thread outlives the database. (A pool's
    hand-over costs about as much as a new thread here: bench/README.md.)

    A caller cancelled meanwhile still waits for `fn` to end before the cancellation goes on: the connection is
    in use on that thread until then, and must never be used by two threads at once (SQLAlchemy rolls it back or
    closes it next)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(), None)
        except BaseException as exc:
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(_settle, done, *outcome)

    threading.Thread(target=run, name="prism-sqlite-wait", daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([done])
        done.exception()  # retrieved: the caller gets its cancellation, not this outcome
        raise


def _settle(done: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if error is None:
        done.set_result(result)
    else:
        done.set_exception(error)


class CommitCounter:
    """Commits that wrote, and the rows they changed, through one engine's connections since its last checkpoint."""

    def __init__(self) -> None:
        self.commits = self.rows = 0

    def checkpoint_due(self, rows: int) -> bool:
        # Only the event loop's thread counts (commits run there), so no lock is needed.
        self.commits += 1
        self.rows += rows
        if self.commits < CHECKPOINT_EVERY_COMMITS and self.rows < CHECKPOINT_EVERY_ROWS:
            return False
        self.commits = self.rows = 0
        return True


class SQLiteConnection:
    """The driver connection (SQLAlchemy's `driver_connection`), with an asyncio API like other asyncio drivers':
    a sqlite3 connection used by one thread at a time, the event loop's or, while the loop awaits it, a
    waiting thread's. Its coroutines finish without suspending unless a statement meets another's lock."""

    def __init__(self, raw: sqlite3.Connection, busy_timeout: float, commits: CommitCounter) -> None:
        self.raw = raw
        self.busy_timeout_ms = int(busy_timeout * 1000)
        self.commits = commits
        self._changes_committed = raw.total_changes
        # How many `prism.storage.long_writes` blocks the caller is in (they may nest): their writes may change many
        # rows by a condition, and what they bind says nothing of what they will take.
        self.long_write_blocks = 0

    async def write(self, fn: Callable[[], T], rows: Iterable[Any]) -> T:
        """`fn`, a write with these rows of parameters: on the loop, unless it is estimated to take longer than a read
        may run there (`write_seconds`) or the caller said it may be long; then on a waiting thread from its start,
        since a write stopped half-way would take its whole transaction with it."""
        if self.long_write_blocks or write_seconds(rows) > INLINE_BUDGET_SECONDS:
            return await self.on_thread(fn)
        return await self.run(fn)

    async def run(self, fn: Callable[[], T], *, reads: bool = False) -> T:
        """`fn` at once; if another connection's lock stops it, again on a waiting thread. A statement that only
        `reads` also gets `INLINE_BUDGET_SECONDS` on the loop: past them SQLite stops it, and it runs again on a
        thread (a read stopped half-way changed nothing)."""
        try:
            return self._within_budget(fn) if reads else fn()
        except sqlite3.OperationalError as exc:
            if not (is_busy(exc) or (reads and is_interrupted(exc))):
                raise
        return await self.on_thread(fn)

    def _within_budget(self, fn: Callable[[], T]) -> T:
        deadline = time.perf_counter() + INLINE_BUDGET_SECONDS
        self.raw.set_progress_handler(lambda: time.perf_counter() > deadline, PROGRESS_EVERY_INSTRUCTIONS)
        try:
            return fn()
        finally:
            self.raw.set_progress_handler(None, 0)

    async def on_thread(self, fn: Callable[[], T]) -> T:
        """Run `fn` on a waiting thread, where the connection waits up to the busy timeout for a lock."""
        return await on_waiting_thread(partial(self._waiting, fn))

    def _waiting(self, fn: Callable[[], T]) -> T:
        _execute(self.raw, f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        try:
            return fn()
        finally:
            _execute(self.raw, "PRAGMA busy_timeout = 0")

    async def begin(self, statement: str) -> None:
        await self.run(partial(_execute, self.raw, statement))

    async def fetch_all(self, sql: str, parameters: Sequence[Any]) -> list[Any]:
        """Rows of one statement, in the connection's current transaction: a SELECT, or a write with RETURNING
        (which gets no budget: a write stopped half-way would roll back the whole transaction)."""
        fetch = partial(_fetch_all, self.raw, sql, parameters)
        return await (self.run(fetch, reads=True) if only_reads(sql) else self.write(fetch, (parameters,)))

    async def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement per row of parameters, in the connection's current transaction."""
        await self.write(partial(_execute_many, self.raw, sql, rows), rows)

    def cursor(self) -> SQLiteCursor:
        return SQLiteCursor(self, self.raw.cursor())

    async def commit(self) -> None:
        """COMMIT, on the loop unless the transaction changed so many rows that appending its pages to the WAL would
        hold it past a read's budget; then a checkpoint, if due, on a thread (with the commit's, if it has one)."""
        rows, self._changes_committed = self.raw.total_changes - self._changes_committed, self.raw.total_changes
        checkpoint_due = rows > 0 and self.commits.checkpoint_due(rows)
        if rows * COMMIT_ROW_SECONDS > INLINE_BUDGET_SECONDS:
            await self.on_thread(partial(_commit, self.raw, checkpoint_due))
            return
        await self.run(self.raw.commit)
        if checkpoint_due:
            await self.on_thread(partial(checkpoint, self.raw))

    async def rollback(self) -> None:
        self.raw.rollback()
        # The rows it had changed count in SQLite's total still, but they are not the next commit's to append.
        self._changes_committed = self.raw.total_changes

    def close_now(self) -> None:
        # Closing waits for nothing; only the last connection to the file checkpoints while closing. A connection
        # SQLAlchemy closes after a cancellation (it invalidates it, without rolling back) may be in a transaction
        # with a statement of a cursor it never closed: closed so, SQLite keeps it open, and its write lock held,
        # for as long as that statement lives. Rolled back first, it holds nothing.
        if self.raw.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.raw.rollback()
        self.raw.close()

    @property
    def isolation_level(self) -> str | None:
        return self.raw.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: IsolationLevel) -> None:
        self.raw.isolation_level = value


def _commit(raw: sqlite3.Connection, then_checkpoint: bool) -> None:
    raw.commit()
    if then_checkpoint:
        checkpoint(raw)


def checkpoint(raw: sqlite3.Connection) -> None:
    # PASSIVE waits for no reader or writer: it copies what it can now, and the next one the rest.
    _fetch_all(raw, "PRAGMA wal_checkpoint(PASSIVE)", ())


# The cursors of the connection's own statements are closed where they ran, never left for the event loop to free
# later: freeing or closing a cursor resets its statement, which sqlite3 shares between cursors of the same SQL, and
# a cursor freed on the loop while a thread ran the next slice of the same INSERT broke that one (SQLITE_MISUSE).
def _execute(raw: sqlite3.Connection, sql: str, parameters: Sequence[Any] = ()) -> None:
    raw.execute(sql, parameters).close()


def _execute_many(raw: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    raw.executemany(sql, rows).close()


def _fetch_all(raw: sqlite3.Connection, sql: str, parameters: Sequence[Any]) -> list[Any]:
    cursor = raw.execute(sql, parameters)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


class SQLiteCursor:
    """A sqlite3 cursor with the asyncio cursor API; a statement stopped by another's lock waits on a thread."""

    def __init__(self, connection: SQLiteConnection, cursor: sqlite3.Cursor) -> None:
        self.connection = connection
        self.cursor = cursor

    async def __aenter__(self) -> SQLiteCursor:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.cursor.close()

    @property
    def description(self) -> Any:
        return self.cursor.description

    @property
    def rowcount(self) -> int:
        return self.cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self.cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self.cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self.cursor.arraysize = value

    async def execute(self, sql: str, parameters: Any = ()) -> SQLiteCursor:
        # SQLite does a query's own work (a count, a sort) in its first step, here; rows are then read as fetched.
        execute = partial(self.cursor.execute, sql, parameters)
        if only_reads(sql):
            await self.connection.run(execute, reads=True)
        else:
            await self.connection.write(execute, (parameters,))
        return self

    async def executemany(self, sql: str, parameters: Any) -> SQLiteCursor:
        await self.connection.write(partial(self.cursor.executemany, sql, parameters), parameters)
        return self

    async def fetchone(self) -> Any:
        return self.cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self.cursor.fetchmany(self.cursor.arraysize if size is None else size)

    async def fetchall(self) -> list[Any]:
        return self.cursor.fetchall()

    async def close(self) -> None:
        self.cursor.close()

    async def setinputsizes(self, *_sizes: Any) -> None:
        return None

    def __aiter__(self) -> SQLiteCursor:
        return self

    async def __anext__(self) -> Any:
        row = self.cursor.fetchone()
        if row is None:
            raise StopAsyncIteration
        return row


class AdaptedSQLiteCursor(AsyncAdapt_dbapi_cursor):
    __slots__ = ()


class AdaptedSQLiteStreamingCursor(AsyncAdapt_dbapi_ss_cursor):
    __slots__ = ()


class AdaptedSQLiteConnection(AsyncAdapt_dbapi_connection):
    """The PEP 249 facade SQLAlchemy drives, from SQLAlchemy's own base for asyncio drivers."""

    __slots__ = ()

    def cursor(self, server_side: bool = False) -> AsyncAdapt_dbapi_cursor:
        return AdaptedSQLiteStreamingCursor(self) if server_side else AdaptedSQLiteCursor(self)

    def close(self) -> None:
        # Also called where nothing can be awaited (a pool emptied at exit), and closing waits for nothing.
        self.driver_connection.close_now()

    def create_function(self, *args: Any, **kwargs: Any) -> None:
        self.driver_connection.raw.create_function(*args, **kwargs)

    @property
    def isolation_level(self) -> str | None:
        return self.driver_connection.isolation_level  # type: ignore[no-any-return]

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self.driver_connection.isolation_level = value


def _open(database: str, busy_timeout: float, uri: bool) -> sqlite3.Connection:
    """On a waiting thread: the file opened (waiting up to the busy timeout for a lock), WAL and the rest set."""
    raw = sqlite3.connect(database, timeout=busy_timeout, isolation_level=None, check_same_thread=False, uri=uri)
    try:
        for pragma in PRAGMAS:
            raw.execute(f"PRAGMA {pragma}").fetchall()
        raw.execute("PRAGMA busy_timeout = 0")
        # SQLite's own lower() changes ASCII letters only, where Python's (a search term's) changes every script:
        # "Équipe" searched as "équipe" found nothing. No index is built on lower(), so replacing it is safe.
        raw.create_function("lower", 1, _lower, deterministic=True)
    except BaseException:
        raw.close()
        raise
    return raw


def _lower(value: Any) -> Any:
    """lower() as SQL calls it, with Python's Unicode case mapping: NULL stays NULL, anything else is read as text."""
    if value is None or isinstance(value, str):
        return value if value is None else value.lower()
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return text.lower()


class SQLiteDBAPI:
    """The DBAPI module SQLAlchemy sees: sqlite3's names, and `connect` making adapted connections."""

    paramstyle = "qmark"
    apilevel = "2.0"
    threadsafety = 1

    def __init__(self) -> None:
        for name in ("Error", "Warning", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
                     "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError",
                     "sqlite_version", "sqlite_version_info", "Binary", "PARSE_DECLTYPES", "PARSE_COLNAMES"):
            setattr(self, name, getattr(sqlite3, name))
        self.commits = CommitCounter()

    def connect(self, database: str, *, timeout: float = 5.0, uri: bool = False, **_ignored: Any,
                ) -> AdaptedSQLiteConnection:
        opening = on_waiting_thread(partial(_open, database, timeout, uri))
        # Typed as Any: SQLAlchemy's protocol for driver connections also asks for a catch-all __getattr__.
        driver: Any = SQLiteConnection(await_(opening), timeout, self.commits)
        return AdaptedSQLiteConnection(self, driver)


class PrismSQLiteDialect(SQLiteDialect_pysqlite):
    """`sqlite+prism://`: SQLAlchemy's pysqlite dialect over the adapter above, for the asyncio extension.

    `begin` (an argument of `create_async_engine`) is the statement that begins each transaction: the driver's
    own transaction handling is off (``isolation_level=None``), as in SQLAlchemy's recipe for SQLite's
    transactional modes, and the dialect's `do_begin` emits it. Through the driver rather than SQLAlchemy's
    statement path, which would cost ~100 µs per transaction here; a failure is wrapped like any statement's.
    """

    driver = DRIVER
    is_async = True
    supports_statement_cache = True
    supports_server_side_cursors = True  # `AsyncSession.stream`: rows fetched as they are read
    execution_ctx_cls = SQLiteExecutionContext_aiosqlite  # its server-side cursor is the driver's own cursor

    def __init__(self, begin: str = "BEGIN", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.begin_statement = begin

    @classmethod
    def import_dbapi(cls) -> Any:
        return SQLiteDBAPI()

    def do_begin(self, dbapi_connection: Any) -> None:
        statement = self.begin_statement
        dbapi_connection.run_async(lambda driver: driver.begin(statement))

    @classmethod
    def get_pool_class(cls, url: URL) -> type[pool.Pool]:
        return pool.AsyncAdaptedQueuePool

    def get_driver_connection(self, connection: Any) -> SQLiteConnection:
        return connection.driver_connection  # type: ignore[no-any-return]


registry.register(f"sqlite.{DRIVER}", __name__, "PrismSQLiteDialect")
