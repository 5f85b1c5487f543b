"""An aiosqlite connection that runs SQLite calls inline, on the event loop's thread.

aiosqlite sends every call (cursor, execute, fetch, close, commit ...) to a worker thread and back:
four or more thread hops per statement, each waiting for the GIL and for the loop to come round.
For an embedded database whose statements take microseconds, those hops cost far more than the
work. Running the calls inline removes them; SQLAlchemy's async layer is unchanged.

The price: a statement that has to wait for SQLite's lock blocks the loop while it waits. In WAL mode
readers never wait for writers, and writers inside one process are queued by `Database` before they
reach SQLite, so only a writer in *another* process can make us wait — bounded by `busy_timeout`.
Production deployments with several processes use PostgreSQL, where none of this applies.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import aiosqlite


class InlineConnection(aiosqlite.Connection):
    """aiosqlite's API, without its thread."""

    def __init__(self, connector: Callable[[], sqlite3.Connection]) -> None:
        super().__init__(connector, iter_chunk_size=64)

    @property
    def sqlite(self) -> sqlite3.Connection:
        """The sqlite3 connection underneath, for statements Prism sends to the driver directly."""
        return self._conn

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._running or self._connection is None:
            raise ValueError("Connection closed")
        return fn(*args, **kwargs)

    async def _connect(self) -> InlineConnection:
        if self._connection is None:
            self._connection = self._connector()
        return self

    def __await__(self) -> Any:  # no thread to start
        return self._connect().__await__()

    def stop(self) -> None:
        self._running = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def close(self) -> None:
        self.stop()


def inline_creator(path: str, *, busy_timeout_seconds: float) -> Callable[[], Any]:
    """An `async_creator` for SQLAlchemy's aiosqlite dialect."""

    def connect() -> sqlite3.Connection:
        # isolation_level=None: SQLAlchemy's begin event emits BEGIN itself (see db.py).
        return sqlite3.connect(path, timeout=busy_timeout_seconds, isolation_level=None,
                               check_same_thread=False)

    async def create() -> InlineConnection:
        return await InlineConnection(connect)._connect()

    return create
