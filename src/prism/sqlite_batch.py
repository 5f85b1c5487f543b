"""SQLite: the ledger writer's transactions on one session kept open, begun and committed on the driver.

Every dispatch batch is one write transaction. Through SQLAlchemy each one builds a session and a
session transaction, checks a connection out of the pool and back in, and makes two trips into its
greenlet: ~10x the cost of the batch's own statements when a batch reads 32 records and appends 32
entries (measured: ~280 µs of bookkeeping against ~25 µs of SQLite per batch, on the event loop).

So on SQLite the ledger writer keeps ONE session on ONE connection for all its batches. SQLAlchemy's
transaction on it is begun once and stays open; the *database* transaction is bracketed per batch here,
with ``BEGIN IMMEDIATE`` and ``COMMIT`` (or ``ROLLBACK``) sent straight to the sqlite3 connection.
Between batches the connection is idle in autocommit mode and holds no lock, exactly as a connection
back in the pool would. Inside a batch everything works as in any session: ORM queries, flushes,
SAVEPOINTs for each write handler, the prepared path.

What SQLAlchemy's commit would also do is done here: pending ORM changes are flushed before COMMIT,
the session's `after_commit` listeners run after it (the webhook workers' wake-up), and the identity
map is emptied, so no object outlives its batch. If a batch fails in any way, the database transaction
is rolled back and the session is closed and replaced: the next batch starts from a fresh one.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker


class HeldSession:
    """One session for a sequence of SQLite write transactions; callers serialize on the writer lock."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._session: AsyncSession | None = None
        self._driver: sqlite3.Connection | None = None

    @property
    def is_open(self) -> bool:
        """Whether it holds a connection of the pool now."""
        return self._session is not None

    async def _open(self) -> tuple[AsyncSession, sqlite3.Connection]:
        session = self._sessions()
        try:
            # Begins SQLAlchemy's transaction; Database's `begin` listener sends BEGIN IMMEDIATE, ended at once
            # below: from here on each batch begins its own.
            connection = await session.connection()
            raw = await connection.get_raw_connection()
            driver: sqlite3.Connection = raw.driver_connection.sqlite  # type: ignore[union-attr]
            driver.execute("COMMIT")
        except BaseException:
            await session.close()
            raise
        self._session, self._driver = session, driver
        return session, driver

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """One database transaction: committed on success, rolled back on any exception."""
        if self._session is None or self._driver is None:
            session, driver = await self._open()
        else:
            session, driver = self._session, self._driver
        sync = session.sync_session
        try:
            driver.execute("BEGIN IMMEDIATE")
            yield session
            if not sync._is_clean():  # what commit() would flush first
                await session.flush()
            driver.execute("COMMIT")
        except BaseException:
            await self._discard(driver)
            raise
        try:
            sync.dispatch.after_commit(sync)
        finally:
            sync.expunge_all()

    async def _discard(self, driver: sqlite3.Connection) -> None:
        """Roll the database transaction back and drop the session; the next transaction opens a new one."""
        try:
            if driver.in_transaction:
                driver.execute("ROLLBACK")
        finally:
            await self.close()

    async def close(self) -> None:
        session, self._session, self._driver = self._session, None, None
        if session is not None:
            # Shielded: a cancelled caller must still give the connection back to the pool.
            await asyncio.shield(session.close())
