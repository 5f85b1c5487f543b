"""Engines and sessions.

SQLite gets two engines on the same file: writers open transactions with ``BEGIN IMMEDIATE`` so a
read-then-write transaction never fails to upgrade its lock under concurrency (WAL would answer
SQLITE_BUSY_SNAPSHOT at once); readers use plain deferred transactions and never block writers.
PostgreSQL uses one engine for both.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.ext.asyncio import create_async_engine as _create_async_engine
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.pool import NullPool

from prism.sqlite_batch import HeldSession
from prism.sqlite_checkpoint import WalCheckpointer
from prism.sqlite_inline import inline_creator

# How long a statement waits for another process's SQLite write lock before failing.
SQLITE_BUSY_TIMEOUT_SECONDS = 10.0


def _json_text(value: Any) -> str:
    """JSON columns (every ledger entry has one) through orjson: several times faster than json.dumps."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def normalize_url(url: str) -> str:
    """Accept plain `postgresql://` and `sqlite:///` URLs and pick the async drivers."""
    parsed = make_url(url)
    driver = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg",
              "sqlite": "sqlite+aiosqlite"}.get(parsed.drivername)
    return parsed.set(drivername=driver).render_as_string(hide_password=False) if driver else url


def _sqlite_engine(url: str, *, immediate: bool) -> AsyncEngine:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ValueError("Prism needs a SQLite file, not an in-memory database")
    engine = _create_async_engine(
        url, async_creator=inline_creator(database, busy_timeout_seconds=SQLITE_BUSY_TIMEOUT_SECONDS),
        json_serializer=_json_text, json_deserializer=orjson.loads)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA wal_autocheckpoint=0")  # Database's WalCheckpointer does it, off the loop
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")
        cursor.close()

    begin = "BEGIN IMMEDIATE" if immediate else "BEGIN"

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Straight to sqlite3 (under prism.sqlite_inline's adapter): `conn.exec_driver_sql` would run the whole
        # statement machinery for these few bytes, once per transaction. A failure (the lock not obtained within
        # the busy timeout) is wrapped as that would wrap it: sqlalchemy.exc.OperationalError.
        try:
            conn.connection.driver_connection.sqlite.execute(begin)
        except sqlite3.Error as exc:
            raise DBAPIError.instance(begin, (), exc, sqlite3.Error, dialect=conn.dialect) from exc

    return engine


class Database:
    """The process's engines. `write()` for transactions that may write, `read()` for pure reads."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.dialect = make_url(self.url).get_backend_name()
        if self.is_sqlite:
            self.engine = _sqlite_engine(self.url, immediate=True)
            self.read_engine = _sqlite_engine(self.url, immediate=False)
        else:
            self.engine = _create_async_engine(self.url, pool_size=20, max_overflow=20,
                                               json_serializer=_json_text, json_deserializer=orjson.loads)
            self.read_engine = self.engine
        # SQLite has one writer at a time; queueing writers here is fair and cheap, whereas letting
        # them meet in SQLite's busy handler costs sleeps of up to 100 ms each.
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        self._checkpointer = (WalCheckpointer(str(make_url(self.url).database), self._write_lock,
                                              busy_timeout_seconds=SQLITE_BUSY_TIMEOUT_SECONDS)
                              if self._write_lock is not None else None)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self.read_sessions = async_sessionmaker(self.read_engine, expire_on_commit=False)
        self._held = HeldSession(self.sessions) if self.is_sqlite else None

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """One transaction: committed on success, rolled back on any exception."""
        if self._write_lock is None:
            async with _transaction(self.sessions()) as session:
                yield session
            return
        if self._checkpointer is not None:  # writes grow the WAL: from the first one on, someone checkpoints it
            self._checkpointer.start()
        async with self._write_lock, _transaction(self.sessions()) as session:
            yield session

    @asynccontextmanager
    async def batch(self) -> AsyncIterator[AsyncSession]:
        """`write()` for the ledger writer's batches, which run back to back all day: on SQLite they share one
        session kept open (prism.sqlite_batch), whose setting-up would otherwise cost more than a batch's work."""
        if self._held is None or self._write_lock is None:
            async with self.write() as session:
                yield session
            return
        if self._checkpointer is not None:
            self._checkpointer.start()
        async with self._write_lock, self._held.transaction() as session:
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with _transaction(self.read_sessions()) as session:
            yield session

    async def dispose(self) -> None:
        if self._held is not None:
            await self._held.close()
        if self._checkpointer is not None:
            await self._checkpointer.stop()
        await self.engine.dispose()
        if self.read_engine is not self.engine:
            await self.read_engine.dispose()


@asynccontextmanager
async def _transaction(session: AsyncSession) -> AsyncIterator[AsyncSession]:
    """`async with session, session.begin():` with one trip into SQLAlchemy's greenlet instead of three.

    Every dispatch batch opens one of these, and each trip costs more than a statement on the prepared path.
    Beginning the ORM transaction does no I/O (the connection is taken with the first statement), so it runs
    here; ending it (commit, or rollback after an exception; either releases the connection) is the one trip.
    Closing the session afterwards only forgets its objects, so it needs no trip either — unless the end did
    not complete (the caller was cancelled meanwhile): then it is closed the way AsyncSession closes itself.
    """
    sync = session.sync_session
    transaction = sync.begin()
    transaction.__enter__()
    try:
        yield session
    except BaseException as exc:
        await _end(session, transaction, type(exc), exc, exc.__traceback__)
        raise
    await _end(session, transaction, None, None, None)


async def _end(session: AsyncSession, transaction: SessionTransaction, *exc_info: Any) -> None:
    try:
        await session.run_sync(_exit, transaction, *exc_info)
    finally:
        if session.sync_session.in_transaction():
            await session.__aexit__(None, None, None)  # releases the connection, shielded from cancellation
        else:
            session.sync_session.close()


def _exit(_session: Session, transaction: SessionTransaction, *exc_info: Any) -> None:
    transaction.__exit__(*exc_info)  # what `with session.begin():` does on leaving: commit, or roll back


def one_shot_engine(url: str) -> AsyncEngine:
    """An engine without a pool, for migrations and CLI commands."""
    return _create_async_engine(normalize_url(url), poolclass=NullPool, json_serializer=_json_text,
                                json_deserializer=orjson.loads)
