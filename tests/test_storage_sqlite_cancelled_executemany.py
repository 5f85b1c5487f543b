"""A write transaction cancelled while SQLAlchemy's executemany of many rows runs on the driver's thread: SQLAlchemy
invalidates and closes the connection without rolling it back, and leaves a cursor of it unclosed; closed so,
SQLite kept the connection, and the write lock, open: every later writer, this process's or another's, got
"database is locked" (docs/architecture.md "Storage": a cancelled task's connection is rolled back)."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from prism.storage import Database, StorageOptions
from tests.test_storage_sqlite import _prepare

pytestmark = pytest.mark.engine_independent

OPTIONS = StorageOptions(pool_size=1, max_overflow=0, pool_timeout_seconds=5, busy_timeout_seconds=1)


async def test_a_writer_cancelled_during_a_large_executemany_releases_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "cancel-executemany.db"
    database = Database(_prepare(path), OPTIONS)
    try:
        async with database.write() as session:  # the pool's one connection opened first
            await session.execute(text("SELECT 1"))

        async def write() -> None:
            async with database.write() as session:
                # 100,000 rows: estimated past the loop's budget, so the executemany runs on a thread
                await session.execute(text("INSERT INTO t VALUES (:x)"), [{"x": "y" * 100} for _ in range(100_000)])

        task = asyncio.create_task(write())
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        del task
        gc.collect()

        # Nothing was committed, and nothing should hold the write lock any more: another process (the CLI,
        # `prism worker`) can take it ...
        other = sqlite3.connect(path, timeout=1, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        finally:
            other.close()
        # ... and so can this process's next writer.
        async with database.write() as session:
            await session.execute(text("INSERT INTO t VALUES ('after')"))
        async with database.read() as session:
            assert (await session.execute(text("SELECT x FROM t"))).scalars().all() == ["after"]
    finally:
        await database.dispose()
