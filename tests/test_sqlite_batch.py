"""SQLite: the ledger writer's batches share one session and connection (prism.sqlite_batch), and each batch is
still a transaction of its own — committed or rolled back whole, its ORM changes flushed, its listeners run,
no lock held and no object kept once it is over."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import String, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from prism.storage import Database
from prism.webhooks import signal

pytestmark = pytest.mark.engine_independent


class _Base(DeclarativeBase):
    pass


class Note(_Base):
    __tablename__ = "notes"

    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str] = mapped_column(String(64))


@pytest.fixture
async def database(tmp_path: Path) -> Any:
    path = tmp_path / "batch.db"
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body VARCHAR(64) NOT NULL)")
    setup.close()
    db = Database(f"sqlite:///{path}")
    yield db
    await db.dispose()


def _other_connection(db: Database) -> sqlite3.Connection:
    """A second connection that refuses to wait for a lock: it fails at once if a batch still holds one."""
    return sqlite3.connect(db.engine.url.database or "", timeout=0, isolation_level=None)


def _bodies(db: Database) -> list[str]:
    conn = _other_connection(db)
    try:
        return [row[0] for row in conn.execute("SELECT body FROM notes ORDER BY id")]
    finally:
        conn.close()


async def _driver_of(session: AsyncSession) -> Any:
    return (await session.connection()).sync_connection.connection.driver_connection  # type: ignore[union-attr]


async def test_batches_share_one_connection_and_hold_no_lock_between_them(database: Database) -> None:
    drivers = []
    for i in range(3):
        async with database.batch() as session:
            await session.execute(text("INSERT INTO notes (body) VALUES (:b)"), {"b": f"n{i}"})
            drivers.append(await _driver_of(session))
        other = _other_connection(database)
        try:  # would raise "database is locked" if the batch's transaction were still open
            other.execute("BEGIN IMMEDIATE")
            other.execute("COMMIT")
        finally:
            other.close()
    assert drivers[0] is drivers[1] is drivers[2]
    assert _bodies(database) == ["n0", "n1", "n2"]


async def test_a_failed_batch_is_rolled_back_whole_and_the_next_starts_on_a_fresh_session(database: Database) -> None:
    async with database.batch() as session:
        first = session
        await session.execute(text("INSERT INTO notes (body) VALUES ('kept')"))
    with pytest.raises(RuntimeError):
        async with database.batch() as session:
            assert session is first
            await session.execute(text("INSERT INTO notes (body) VALUES ('undone')"))
            session.add(Note(body="undone too"))
            raise RuntimeError("the batch fails")
    async with database.batch() as session:
        assert session is not first
        await session.execute(text("INSERT INTO notes (body) VALUES ('after')"))
    assert _bodies(database) == ["kept", "after"]


async def test_pending_orm_changes_are_flushed_before_the_commit(database: Database) -> None:
    async with database.batch() as session:
        session.add(Note(body="never flushed by the caller"))
    assert _bodies(database) == ["never flushed by the caller"]


async def test_a_savepoint_rolls_back_only_its_own_changes(database: Database) -> None:
    async with database.batch() as session:
        session.add(Note(body="outside"))
        await session.flush()
        with pytest.raises(ValueError):
            async with session.begin_nested():
                session.add(Note(body="inside"))
                await session.flush()
                raise ValueError("the unit is refused")
    assert _bodies(database) == ["outside"]


async def test_no_object_outlives_its_batch(database: Database) -> None:
    async with database.batch() as session:
        note = Note(body="before")
        session.add(note)
    other = _other_connection(database)
    try:
        other.execute("UPDATE notes SET body = 'changed elsewhere'")
    finally:
        other.close()
    async with database.batch() as session:
        assert note not in session
        fresh = await session.get(Note, note.id)
        assert fresh is not None and fresh.body == "changed elsewhere"


async def test_after_commit_listeners_run_for_a_committed_batch_only(database: Database) -> None:
    woken = asyncio.Event()
    signal.register(woken)
    try:
        with pytest.raises(RuntimeError):
            async with database.batch() as session:
                signal.wake_workers_after_commit(session)
                raise RuntimeError("rolled back: nothing to deliver")
        assert not woken.is_set()
        async with database.batch() as session:
            signal.wake_workers_after_commit(session)
            assert not woken.is_set()
        assert woken.is_set()
        woken.clear()
        async with database.batch() as session:  # the listener ran once and is gone
            await session.execute(text("SELECT 1"))
        assert not woken.is_set()
    finally:
        signal.unregister(woken)
