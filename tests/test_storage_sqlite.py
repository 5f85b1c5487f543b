"""SQLite specifics: WAL with SQLite's own checkpoints, write transactions that take the write lock at once,
statements on the event loop except those that wait for a lock, reads past their budget, writes estimated (or said)
to be long and the commits after them, and a Database that can be disposed at any moment."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from prism.storage import (
    Database,
    DatabaseUnavailable,
    StorageOptions,
    long_writes,
    sqlite_driver,
    unavailable_error,
)
from tests.loop_watch import loop_busy_between_ticks

pytestmark = pytest.mark.engine_independent

QUICK = StorageOptions(pool_size=5, max_overflow=5, pool_timeout_seconds=5, busy_timeout_seconds=0.3)
# Twelve writers queue for one lock: on a slow machine the last one waits longer than QUICK's 0.3 s, and this test
# is about disposal mid-write, not about how long a writer may wait.
PATIENT = StorageOptions(pool_size=5, max_overflow=5, pool_timeout_seconds=5, busy_timeout_seconds=10)


def _prepare(path: Path) -> str:
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x TEXT)")
    setup.close()
    return f"sqlite:///{path}"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    db = Database(_prepare(tmp_path / "storage.db"), QUICK)
    yield db
    await db.dispose()


class LockHolder:
    """Another connection holding SQLite's write lock (BEGIN IMMEDIATE) until released."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.conn.execute("ROLLBACK")
            self.conn.close()


async def test_connections_use_wal_foreign_keys_sqlites_own_checkpoints_and_never_wait_on_the_loop(
        database: Database) -> None:
    async with database.write() as session:
        pragmas = {name: (await session.execute(text(f"PRAGMA {name}"))).scalar_one()
                   for name in ("journal_mode", "foreign_keys", "busy_timeout", "wal_autocheckpoint")}
    # A busy timeout of zero where statements run (the event loop): a lock makes a statement fail at once, and it is
    # run again on a thread with the configured timeout (the tests below). No automatic checkpoint inside a commit
    # on the loop: the driver runs them on a thread.
    assert pragmas == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 0, "wal_autocheckpoint": 0}


async def test_statements_and_commits_run_on_the_event_loop_and_checkpoints_on_a_thread(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    async with database.write() as session:  # the pool's connections are opened (on threads) first
        await session.execute(text("SELECT 1"))
    async with database.read() as session:
        await session.execute(text("SELECT 1"))
    threaded: list[str] = []
    real = sqlite_driver.on_waiting_thread

    async def counted(fn: Any) -> Any:
        threaded.append(repr(fn))
        return await real(fn)

    monkeypatch.setattr(sqlite_driver, "on_waiting_thread", counted)
    async with database.read() as session:
        assert (await session.execute(text("SELECT count(*) FROM t"))).scalar_one() == 0
    assert threaded == []
    async with database.write() as session:
        await session.execute(text("SELECT count(*) FROM t"))
    assert threaded == []  # BEGIN IMMEDIATE, the read and a commit that wrote nothing: all on the loop
    for i in range(sqlite_driver.CHECKPOINT_EVERY_COMMITS - 1):
        async with database.write() as session:
            await session.execute(text("INSERT INTO t VALUES (:x)"), {"x": str(i)})
    assert threaded == []
    async with database.write() as session:  # the 64th commit that wrote: a checkpoint, on a thread
        await session.execute(text("INSERT INTO t VALUES ('last')"))
    assert len(threaded) == 1 and "checkpoint" in threaded[0]


async def test_a_writer_cancelled_while_it_waits_for_the_lock_frees_its_connection_only_when_the_wait_ends(
        tmp_path: Path) -> None:
    options = StorageOptions(pool_size=1, max_overflow=0, pool_timeout_seconds=5, busy_timeout_seconds=5)
    database = Database(_prepare(tmp_path / "cancel.db"), options)
    holder = LockHolder(database.engine.url.database or "")
    try:
        async def write(value: str) -> None:
            async with database.write() as session:
                await session.execute(text("INSERT INTO t VALUES (:x)"), {"x": value})

        waiting = asyncio.create_task(write("cancelled"))
        await asyncio.sleep(0.2)
        waiting.cancel()
        await asyncio.sleep(0.2)
        assert not waiting.done()  # its BEGIN IMMEDIATE still waits on the connection's thread
        holder.release()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(waiting, 5)
        await write("after")  # the one connection was rolled back and returned, usable again
        async with database.read() as session:
            assert (await session.execute(text("SELECT x FROM t"))).scalars().all() == ["after"]
    finally:
        holder.release()
        await database.dispose()


async def test_a_write_takes_the_write_lock_at_its_begin(database: Database) -> None:
    other = sqlite3.connect(database.engine.url.database or "", timeout=0, isolation_level=None)
    try:
        async with database.write() as session:
            await session.execute(text("SELECT count(*) FROM t"))  # only a read so far, yet the lock is taken
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # released with the commit
        other.execute("ROLLBACK")
    finally:
        other.close()


async def test_while_another_connection_holds_the_write_lock_reads_answer_and_a_write_fails_as_unavailable(
        database: Database) -> None:
    async with database.write() as session:
        await session.execute(text("INSERT INTO t VALUES ('before')"))
    holder = LockHolder(database.engine.url.database or "")
    try:
        async with database.read() as session:
            assert (await session.execute(text("SELECT x FROM t"))).scalars().all() == ["before"]
        started = time.monotonic()
        with pytest.raises(OperationalError) as raised:
            async with database.write() as session:
                await session.execute(text("INSERT INTO t VALUES ('waits')"))
        assert time.monotonic() - started >= 0.25  # it waited for the busy timeout
        error = unavailable_error(raised.value)
        assert isinstance(error, DatabaseUnavailable)
        assert (error.status, error.code, error.headers) == (503, "database_unavailable", {"Retry-After": "2"})
    finally:
        holder.release()
    async with database.write() as session:  # the failed begin left nothing behind
        await session.execute(text("INSERT INTO t VALUES ('after')"))
    async with database.read() as session:
        assert (await session.execute(text("SELECT x FROM t ORDER BY rowid"))).scalars().all() == ["before", "after"]


async def test_a_writer_waiting_for_another_connections_lock_leaves_the_event_loop_free(tmp_path: Path) -> None:
    options = StorageOptions(pool_size=5, max_overflow=5, pool_timeout_seconds=5, busy_timeout_seconds=5)
    database = Database(_prepare(tmp_path / "wait.db"), options)
    holder = LockHolder(database.engine.url.database or "")
    try:
        async def write() -> None:
            async with database.write() as session:
                await session.execute(text("INSERT INTO t VALUES ('waited')"))

        writing = asyncio.create_task(write())
        worst_lag = 0.0
        for _ in range(40):  # 0.4 s of 10 ms ticks while the writer waits for the lock
            before = time.monotonic()
            await asyncio.sleep(0.01)
            worst_lag = max(worst_lag, time.monotonic() - before - 0.01)
        assert not writing.done()
        holder.release()
        await asyncio.wait_for(writing, 5)
    finally:
        holder.release()
        await database.dispose()
    assert worst_lag < 0.1, f"the loop stalled {worst_lag * 1000:.0f} ms"


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


async def test_databases_opened_written_and_disposed_mid_write_many_times_leave_nothing_running(
        tmp_path: Path) -> None:
    url = _prepare(tmp_path / "churn.db")
    before = _threads()
    for round_ in range(20):
        database = Database(url, PATIENT)

        async def write(i: int, db: Database = database, r: int = round_) -> None:
            async with db.write() as session:
                for j in range(20):  # enough pages for SQLite's own checkpoints to run now and then
                    await session.execute(text("INSERT INTO t VALUES (:x)"), {"x": f"{r}.{i}.{j}" + "x" * 4000})

        writes = [asyncio.create_task(write(i)) for i in range(12)]
        # Disposed a quarter of a second in, at slightly different moments each round: writes are under way, and
        # the WAL has grown enough for checkpoints to be running too.
        await asyncio.sleep(0.26 + 0.01 * (round_ % 5))
        await database.dispose()
        await asyncio.gather(*writes)
        await database.dispose()  # the writes may have opened connections after the first
    leftover = [t for t in _threads() - before if t.is_alive()]
    deadline = time.monotonic() + 5
    while leftover and time.monotonic() < deadline:  # a closed connection's thread ends just after the close
        await asyncio.sleep(0.05)
        leftover = [t for t in leftover if t.is_alive()]
    assert leftover == []
    check = sqlite3.connect(tmp_path / "churn.db")
    try:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert check.execute("SELECT count(*) FROM t").fetchone() == (20 * 12 * 20,)
    finally:
        check.close()


async def test_the_wal_stays_small_under_steady_writes(database: Database, tmp_path: Path) -> None:
    for round_ in range(150):
        async with database.write() as session:
            for i in range(20):
                await session.execute(text("INSERT INTO t VALUES (:x)"), {"x": f"{round_}.{i}" + "x" * 4_000})
    # 12 MB written: the driver's checkpoint (every 1,000 rows here, ~4 MB) starts the WAL again from its
    # beginning each time, so the file never holds much more than that.
    assert (tmp_path / "storage.db-wal").stat().st_size < 5_000_000


def test_an_in_memory_database_is_refused() -> None:
    with pytest.raises(ValueError, match="file"):
        Database("sqlite:///:memory:", QUICK)


async def test_a_long_read_runs_on_a_thread_and_leaves_the_event_loop_free(database: Database) -> None:
    async with database.write() as session:
        await session.execute(text("INSERT INTO t VALUES (:x)"), [{"x": str(i)} for i in range(300)])
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.005)
            ticks.append(time.monotonic() - before - 0.005)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    try:
        started = time.monotonic()
        async with database.read() as session:  # 27 million combinations: far past the loop's budget for a read
            count = (await session.execute(text("SELECT count(*) FROM t a, t b, t c"))).scalar_one()
        took = time.monotonic() - started
    finally:
        ticker.cancel()
    assert count == 300**3
    assert took > 0.1  # long enough that running it on the loop would have shown
    assert max(ticks) < 0.1, f"the loop stalled {max(ticks) * 1000:.0f} ms during a {took * 1000:.0f} ms read"


async def test_a_write_that_returns_rows_is_never_stopped_for_the_reads_budget(database: Database) -> None:
    """Stopping a read past the loop's budget changes nothing, but SQLite rolls back the whole transaction of a write
    it stops: a long INSERT ... RETURNING runs to its end, and the transaction's earlier writes stay."""
    async with database.write() as session:
        await session.execute(text("INSERT INTO t VALUES (:x)"), [{"x": str(i)} for i in range(300)])
    async with database.write() as session:
        await session.execute(text("INSERT INTO t VALUES ('kept')"))
        driver = (await (await session.connection()).get_raw_connection()).driver_connection
        started = time.monotonic()
        # 90,000 combinations, none of them inserted: far past the budget a read gets on the loop
        returned = await driver.fetch_all("INSERT INTO t SELECT a.x FROM t a, t b WHERE a.x || b.x = 'none' "
                                          "RETURNING x", [])
        assert returned == [] and time.monotonic() - started > sqlite_driver.INLINE_BUDGET_SECONDS
    async with database.read() as session:
        kept = (await session.execute(text("SELECT count(*) FROM t WHERE x = 'kept'"))).scalar_one()
    assert kept == 1


async def _driver_of(session: Any) -> sqlite_driver.SQLiteConnection:
    driver: sqlite_driver.SQLiteConnection = (await (await session.connection()).get_raw_connection()).driver_connection
    return driver


def _rows(count: int, size: int = 40) -> list[tuple[str]]:
    return [(f"{i:0{size}d}",) for i in range(count)]


def _hand_overs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions the driver runs on a thread from now on (a repr would print every row)."""
    names: list[str] = []
    real = sqlite_driver.on_waiting_thread

    async def counted(fn: Any) -> Any:
        inner = fn.args[0] if isinstance(fn, partial) and fn.args and callable(fn.args[0]) else fn
        names.append(getattr(inner, "func", inner).__name__)
        return await real(fn)

    monkeypatch.setattr(sqlite_driver, "on_waiting_thread", counted)
    return names


async def test_a_large_write_and_its_commit_run_on_a_thread_and_leave_the_event_loop_free(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    async with database.write() as session:  # the pool's connection is opened (on a thread) first
        await session.execute(text("SELECT 1"))
    rows = _rows(300_000)  # about a second of SQLite's time, which held the loop for all of it
    threaded = _hand_overs(monkeypatch)
    async with loop_busy_between_ticks() as lags:
        started = time.monotonic()
        async with database.write() as session:
            await (await _driver_of(session)).execute_many("INSERT INTO t VALUES (?)", rows)
        took = time.monotonic() - started
    # the executemany, then the commit with the checkpoint it made due, in one hand-over each
    assert threaded == ["_execute_many", "_commit"]
    async with database.read() as session:
        assert (await session.execute(text("SELECT count(*) FROM t"))).scalar_one() == 300_000
    assert took > 0.1  # long enough that running it on the loop would have shown
    assert max(lags) < 0.1, f"the loop ran {max(lags) * 1000:.0f} ms between ticks in a {took * 1000:.0f} ms write"


async def test_small_writes_and_a_ledger_batchs_worth_of_rows_stay_on_the_event_loop(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    async with database.write() as session:
        await session.execute(text("SELECT 1"))
    threaded = _hand_overs(monkeypatch)
    # 32 rows of 500 bytes: a ledger batch at 32 concurrent calls (bench/dispatch_breakdown.py), ~0.3 ms in SQLite
    assert sqlite_driver.write_seconds(_rows(32, 500)) < sqlite_driver.INLINE_BUDGET_SECONDS
    async with database.write() as session:
        await (await _driver_of(session)).execute_many("INSERT INTO t VALUES (?)", _rows(32, 500))
        await session.execute(text("INSERT INTO t VALUES (:x)"), [{"x": str(i)} for i in range(32)])
        await session.execute(text("UPDATE t SET x = x || 'y' WHERE rowid = 1"))
    assert threaded == []
    # Past the budget, decided from what a write binds: rows, and the size of their values.
    assert sqlite_driver.write_seconds(_rows(1_000)) > sqlite_driver.INLINE_BUDGET_SECONDS
    assert sqlite_driver.write_seconds([("x" * 1_000_000,)]) > sqlite_driver.INLINE_BUDGET_SECONDS
    assert sqlite_driver.write_seconds(iter(_rows(1))) == float("inf")  # rows that cannot be counted


async def test_a_writer_cancelled_during_a_large_write_frees_its_connection_only_when_the_write_ends(
        tmp_path: Path) -> None:
    options = StorageOptions(pool_size=1, max_overflow=0, pool_timeout_seconds=5, busy_timeout_seconds=5)
    database = Database(_prepare(tmp_path / "cancel-write.db"), options)
    ended: list[float] = []

    def slow_rows() -> Iterator[tuple[str]]:  # given slowly, on the write's thread: the write is under way
        for row in _rows(50):
            time.sleep(0.01)
            yield row
        ended.append(time.monotonic())

    async def write() -> None:
        async with database.write() as session:
            await session.execute(text("INSERT INTO t VALUES ('earlier, in the same transaction')"))
            await (await _driver_of(session)).execute_many("INSERT INTO t VALUES (?)", slow_rows())

    try:
        writing = asyncio.create_task(write())
        await asyncio.sleep(0.2)
        writing.cancel()
        cancelled_at = time.monotonic()
        await asyncio.sleep(0.05)
        assert not writing.done()  # its executemany still runs on the connection's thread
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(writing, 5)
        assert ended and ended[0] > cancelled_at  # given back only once the write had ended
        async with database.write() as session:  # the one connection was rolled back and returned, usable again
            await session.execute(text("INSERT INTO t VALUES ('after')"))
        async with database.read() as session:
            assert (await session.execute(text("SELECT x FROM t"))).scalars().all() == ["after"]
    finally:
        await database.dispose()


async def test_writes_of_one_statement_run_on_threads_one_after_another_never_break_each_other(
        database: Database) -> None:
    """sqlite3 shares a statement between the cursors that run the same SQL, and freeing a cursor resets its statement:
    a cursor of one write, freed on the event loop while the next write of the same INSERT ran on a thread, broke that
    one (SQLITE_MISUSE, 'bad parameter or other API misuse') in about half of these transactions."""
    rows = _rows(2_000)  # past the loop's budget: each write runs on a thread
    assert sqlite_driver.write_seconds(rows) > sqlite_driver.INLINE_BUDGET_SECONDS
    for _ in range(10):
        async with database.write() as session:
            driver = await _driver_of(session)
            for _ in range(10):
                await driver.execute_many("INSERT INTO t VALUES (?)", rows)
    async with database.read() as session:
        assert (await session.execute(text("SELECT count(*) FROM t"))).scalar_one() == 10 * 10 * 2_000


async def test_long_write_blocks_nest(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """An inner `long_writes` block ending does not end the outer one's: its writes still go to a thread."""
    threaded = _hand_overs(monkeypatch)
    async with database.write() as session:
        async with long_writes(session):
            async with long_writes(session):
                await session.execute(text("DELETE FROM t WHERE x = 'inner'"))
            await session.execute(text("DELETE FROM t WHERE x = 'outer, after the inner block'"))
        await session.execute(text("DELETE FROM t WHERE x = 'after both: on the loop'"))
    assert threaded.count("execute") == 2, threaded


async def test_a_rolled_back_transaction_s_rows_do_not_count_in_the_next_commit(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's count of changed rows keeps those of a transaction rolled back: the connection's next commit, of
    one row, must not be taken for a large one (sent to a thread, a checkpoint set off)."""
    class Abandoned(Exception):
        pass

    with pytest.raises(Abandoned):
        async with database.write() as session:
            await (await _driver_of(session)).execute_many("INSERT INTO t VALUES (?)", _rows(5_000))
            raise Abandoned
    threaded = _hand_overs(monkeypatch)
    async with database.write() as session:
        await session.execute(text("INSERT INTO t VALUES ('one row')"))
    assert threaded == [], threaded


async def test_writes_said_to_be_long_run_on_a_thread_though_they_bind_little(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DELETE by a condition binds nothing that says how many rows it will change; a caller that knows it may be
    many (a large document's postings) says so, and it runs on a thread (prism.storage.long_writes)."""
    # A million rows: their DELETE takes well over 0.1 s on the fastest machine the suite runs on (300,000 took
    # 0.07 s there), so a DELETE left on the loop would show as a lag.
    async with database.write() as session:
        await (await _driver_of(session)).execute_many("INSERT INTO t VALUES (?)", _rows(1_000_000))
    threaded = _hand_overs(monkeypatch)
    async with loop_busy_between_ticks() as lags:
        started = time.monotonic()
        async with database.write() as session:
            async with long_writes(session):
                await session.execute(text("DELETE FROM t WHERE x > :none"), {"none": ""})
            await session.execute(text("INSERT INTO t VALUES ('after the block: on the loop')"))
            driver_after = (await _driver_of(session)).long_write_blocks
        took = time.monotonic() - started
    assert threaded[0] == "execute" and threaded.count("execute") == 1, threaded  # the DELETE alone
    assert driver_after == 0
    async with database.read() as session:
        assert (await session.execute(text("SELECT count(*) FROM t"))).scalar_one() == 1
    assert took > 0.1  # long enough that running it on the loop would have shown
    assert max(lags) < 0.1, f"the loop ran {max(lags) * 1000:.0f} ms between ticks in a {took * 1000:.0f} ms delete"
