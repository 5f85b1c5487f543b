"""SQLite engines: WAL, foreign keys, a busy timeout, and transactions begun the way each engine needs.

Statements run on aiosqlite's own thread per connection, so a statement waiting for another process's
write lock (the CLI, `prism worker`, a second `prism serve`) blocks only its own transaction, never the
event loop: requests that do not write go on being answered.

Transactions follow SQLAlchemy's documented recipe for the sqlite3/aiosqlite drivers (see "Enabling
Non-Legacy SQLite Transactional Modes"): the driver's own transaction handling is turned off when a
connection is made, and SQLAlchemy's `begin` event emits the BEGIN. Writers emit ``BEGIN IMMEDIATE``, which
takes the write lock at once: a transaction that reads and then writes can then never fail to upgrade its
lock (WAL would answer SQLITE_BUSY_SNAPSHOT at once, with no wait). Readers emit a plain BEGIN: in WAL mode
they never wait for writers and writers never wait for them.

WAL checkpoints are SQLite's own automatic ones (every 1,000 pages, run by the committing connection on its
aiosqlite thread, off the event loop).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from prism.storage.engines import JSON_OPTIONS, StorageOptions, pool_options

WRITE_BEGIN = "BEGIN IMMEDIATE"
READ_BEGIN = "BEGIN"


def sqlite_engine(url: str, options: StorageOptions, *, begin: str) -> AsyncEngine:
    """An engine on the SQLite file of `url` whose transactions start with `begin`."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ValueError("Prism needs a SQLite file, not an in-memory database")
    # sqlite3's `timeout` is SQLite's busy timeout: how long a statement waits for another connection's lock.
    engine = create_async_engine(url, connect_args={"timeout": options.busy_timeout_seconds},
                                 **pool_options(options), **JSON_OPTIONS)

    @event.listens_for(engine.sync_engine, "connect")
    def set_up_connection(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the `begin` listener below emits BEGIN, not the driver
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def begin_transaction(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine
