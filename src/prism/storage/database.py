"""The process's database: `write()` and `read()` transactions, each on a session of its own.

SQLite gets two engines on the same file: writers begin with ``BEGIN IMMEDIATE``, readers with a plain
BEGIN (prism.storage.sqlite). PostgreSQL uses one engine for both.

A session lives exactly as long as its transaction: nothing a transaction loaded or worked out (ORM objects,
`session.info`) can be read by a later one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from prism.config import get_settings
from prism.storage.engines import StorageOptions, backend_of, normalize_url, postgres_engine
from prism.storage.errors import DatabaseUnavailable
from prism.storage.sqlite import READ_BEGIN, WRITE_BEGIN, sqlite_engine


class Database:
    """`write()` for transactions that may write, `read()` for pure reads; `dispose()` once done.

    `options` default to the process's settings (PRISM_DATABASE_POOL_SIZE ...).
    """

    def __init__(self, url: str, options: StorageOptions | None = None) -> None:
        self.url = normalize_url(url)
        self.dialect = backend_of(self.url)
        self.options = options or StorageOptions.from_settings(get_settings())
        if self.is_sqlite:
            self.engine = sqlite_engine(self.url, self.options, begin=WRITE_BEGIN)
            self.read_engine = sqlite_engine(self.url, self.options, begin=READ_BEGIN)
        else:
            self.engine = self.read_engine = postgres_engine(self.url, self.options)
        # SQLite has one writer at a time. Queueing this process's writers here is fair and costs nothing,
        # whereas letting them meet in SQLite's busy handler costs sleeps of up to 100 ms each.
        self._writer_turn: asyncio.Lock | None = asyncio.Lock() if self.is_sqlite else None
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self.read_sessions = async_sessionmaker(self.read_engine, expire_on_commit=False)
        self._in_flight = 0
        self._all_ended = asyncio.Event()
        self._all_ended.set()

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """One transaction that may write: committed on success, rolled back on any exception."""
        async with self._transaction(self.sessions, self._writer_turn) as session:
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """One transaction that only reads; on SQLite it never waits for a writer."""
        async with self._transaction(self.read_sessions, None) as session:
            yield session

    @asynccontextmanager
    async def _transaction(self, sessions: async_sessionmaker[AsyncSession],
                           turn: asyncio.Lock | None) -> AsyncIterator[AsyncSession]:
        self._in_flight += 1  # counted while waiting for its turn too: dispose() waits for queued writers
        self._all_ended.clear()
        try:
            async with self._turn_of(turn), sessions() as session, session.begin():
                yield session
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._all_ended.set()

    @asynccontextmanager
    async def _turn_of(self, turn: asyncio.Lock | None) -> AsyncIterator[None]:
        """This process's writers queue for SQLite's one write lock here. A writer waits for its turn no longer
        than it would wait for another process's lock: the busy timeout, then DatabaseUnavailable."""
        if turn is None:
            yield
            return
        try:
            async with asyncio.timeout(self.options.busy_timeout_seconds):
                await turn.acquire()
        except TimeoutError:
            raise DatabaseUnavailable() from None
        try:
            yield
        finally:
            turn.release()

    async def dispose(self) -> None:
        """Close every connection, once the transactions in flight have ended (they are not cut off: a
        connection closed under a running statement would fail it, and one left open would outlive us)."""
        while self._in_flight:
            await self._all_ended.wait()
        await self.engine.dispose()
        if self.read_engine is not self.engine:
            await self.read_engine.dispose()
