"""SQLite engines: WAL, foreign keys, a busy timeout, and transactions begun the way each engine needs.

Connections come from Prism's SQLite driver (prism.storage.sqlite_driver), which runs statements on the event
loop and sends to a thread only a statement that meets another connection's lock, so a writer waiting for
another process's write lock (the CLI, `prism worker`, a second `prism serve`) blocks only its own transaction,
never the event loop: requests that do not write go on being answered. The driver sets WAL,
``synchronous=NORMAL`` and foreign keys on every connection, and runs WAL checkpoints on a thread.

Transactions follow SQLAlchemy's documented recipe for the sqlite3 driver (see "Enabling Non-Legacy SQLite
Transactional Modes"): the driver's own transaction handling is off (``isolation_level=None``), and Prism's dialect
emits the BEGIN when SQLAlchemy begins a transaction (`do_begin`). Writers emit ``BEGIN IMMEDIATE``, which takes
the write lock at once: a transaction that reads and then writes can then never fail to upgrade its lock (WAL would
answer SQLITE_BUSY_SNAPSHOT at once, with no wait), and none of its statements can wait for another connection.
Readers emit a plain BEGIN: in WAL mode they never wait for writers and writers never wait for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from prism.storage.engines import JSON_OPTIONS, StorageOptions, pool_options
from prism.storage.sqlite_driver import SQLiteConnection

WRITE_BEGIN = "BEGIN IMMEDIATE"
READ_BEGIN = "BEGIN"


def sqlite_engine(url: str, options: StorageOptions, *, begin: str) -> AsyncEngine:
    """An engine on the SQLite file of `url` whose transactions start with `begin`."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ValueError("Prism needs a SQLite file, not an in-memory database")
    # `timeout` is how long a statement may wait (on the driver's thread) for another connection's lock; `begin`
    # goes to Prism's SQLite dialect, which begins every transaction with it.
    return create_async_engine(url, begin=begin, connect_args={"timeout": options.busy_timeout_seconds},
                               **pool_options(options), **JSON_OPTIONS)


@asynccontextmanager
async def long_writes(session: AsyncSession) -> AsyncIterator[None]:
    """Writes of the session's transaction in this block may change many rows by a condition (a large document's
    postings deleted or moved: 20,000 of them take about 50 ms in SQLite). On SQLite they run on a thread, so that the
    event loop serves other requests meanwhile: the driver cannot tell from what a statement binds how many rows it
    will change. On PostgreSQL nothing changes (a statement waits on the network there)."""
    driver = (await (await session.connection()).get_raw_connection()).driver_connection
    if not isinstance(driver, SQLiteConnection):
        yield
        return
    driver.long_write_blocks += 1
    try:
        yield
    finally:
        driver.long_write_blocks -= 1
