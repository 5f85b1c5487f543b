"""SQLite WAL checkpoints run on Database's own thread, never inside a commit on the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from prism.storage import Database

pytestmark = pytest.mark.engine_independent


def _rows_in_main_file(path: Path) -> int:
    """Rows of `t` in the database file itself: `immutable=1` makes SQLite ignore the WAL."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])
    finally:
        conn.close()


def _rows_copied_so_far(path: Path) -> int:
    """`_rows_in_main_file` while the checkpointer may be copying pages in: the file read mid-copy can be torn
    (SQLite reports it malformed), which only means the copy is not finished."""
    try:
        return _rows_in_main_file(path)
    except sqlite3.DatabaseError:
        return -1


def _prepare(path: Path) -> None:
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x TEXT)")
    setup.close()  # the last connection to close folds the WAL into the file


async def test_commits_never_checkpoint_and_the_checkpointer_copies_the_wal_soon(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    _prepare(path)
    before = asyncio.all_tasks()
    database = Database(f"sqlite:///{path}")
    try:
        async with database.write() as s:
            checkpointing = next(t for t in asyncio.all_tasks() if t.get_name() == "prism-sqlite-checkpoint"
                                 and t not in before)
            autocheckpoint = (await s.execute(text("PRAGMA wal_autocheckpoint"))).scalar_one()
            # ~1,200 pages: SQLite's automatic checkpoint (1,000 pages) would run inside this commit.
            for i in range(300):
                await s.execute(text("INSERT INTO t VALUES (:x)"), {"x": f"{i}" + "x" * 16_000})
        assert autocheckpoint == 0
        deadline = time.monotonic() + 5
        while _rows_copied_so_far(path) < 300:  # the checkpointer thread copies the pages in
            assert time.monotonic() < deadline, "the WAL was never checkpointed"
            await asyncio.sleep(0.05)
    finally:
        await database.dispose()
    assert checkpointing.done()


async def test_dispose_checkpoints_what_is_left(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    _prepare(path)
    database = Database(f"sqlite:///{path}")
    database._checkpointer.interval_seconds = 3600  # type: ignore[union-attr]  # only the final one runs
    holder = sqlite3.connect(path)  # keeps the WAL from being folded in when the engine's connections close
    holder.execute("SELECT count(*) FROM t").fetchone()
    try:
        async with database.write() as s:
            await s.execute(text("INSERT INTO t VALUES ('a')"))
        assert _rows_in_main_file(path) == 0
        await database.dispose()
        assert _rows_in_main_file(path) == 1
    finally:
        holder.close()


async def test_the_wal_starts_again_from_its_beginning_under_steady_writes(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    _prepare(path)
    database = Database(f"sqlite:///{path}")
    try:
        for round_ in range(40):
            async with database.write() as s:
                for i in range(20):
                    await s.execute(text("INSERT INTO t VALUES (:x)"), {"x": f"{round_}.{i}" + "x" * 4_000})
            await asyncio.sleep(0.03)
        # 3.2 MB written: with nobody checkpointing, the WAL would hold all of it.
        assert (tmp_path / "wal.db-wal").stat().st_size < 2_000_000
    finally:
        await database.dispose()
