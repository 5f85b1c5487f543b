"""`Database.write()` and `read()` on the engine under test: each is one transaction on a session of its own,
committed or rolled back whole, its connection given back, nothing of it left for the next one to read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import String, func, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.pool import QueuePool

from prism.storage import Database
from prism.webhooks import signal
from tests.processes import scratch_database


class _Base(DeclarativeBase):
    pass


class Note(_Base):
    __tablename__ = "notes"

    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str] = mapped_column(String(64))


@pytest.fixture
def database_address(tmp_path: Path) -> Iterator[str]:
    with scratch_database(tmp_path, "storage") as url:
        yield url


@pytest.fixture
async def database(database_address: str) -> AsyncIterator[Database]:
    db = Database(database_address)
    async with db.write() as session:
        await session.run_sync(lambda sync: _Base.metadata.create_all(sync.connection()))
    yield db
    await db.dispose()


async def _bodies(db: Database) -> list[str]:
    async with db.read() as session:
        return list((await session.execute(select(Note.body).order_by(Note.id))).scalars())


def _checked_out(db: Database) -> int:
    return sum(engine.sync_engine.pool.checkedout() for engine in {db.engine, db.read_engine}
               if isinstance(engine.sync_engine.pool, QueuePool))


async def test_a_write_commits_on_success_and_rolls_back_whole_on_an_exception(database: Database) -> None:
    async with database.write() as session:
        session.add(Note(body="kept"))
    with pytest.raises(RuntimeError):
        async with database.write() as session:
            session.add(Note(body="undone"))
            await session.flush()
            await session.execute(text("INSERT INTO notes (body) VALUES ('undone too')"))
            raise RuntimeError("the change is refused")
    assert await _bodies(database) == ["kept"]
    assert _checked_out(database) == 0


async def test_pending_orm_changes_are_flushed_by_the_commit(database: Database) -> None:
    async with database.write() as session:
        session.add(Note(body="never flushed by the caller"))
    assert await _bodies(database) == ["never flushed by the caller"]


async def test_a_savepoint_rolls_back_only_its_own_changes(database: Database) -> None:
    async with database.write() as session:
        session.add(Note(body="outside"))
        await session.flush()
        with pytest.raises(ValueError):
            async with session.begin_nested():
                session.add(Note(body="inside"))
                await session.flush()
                raise ValueError("the unit is refused")
        session.add(Note(body="after"))
    assert await _bodies(database) == ["outside", "after"]


async def test_each_transaction_has_a_session_of_its_own_that_keeps_nothing_of_the_last(database: Database) -> None:
    async with database.write() as session:
        session.info["worked out earlier"] = True
        note = Note(body="before")
        session.add(note)
    async with database.write() as session:
        await session.execute(text("UPDATE notes SET body = 'changed by plain SQL'"))
    async with database.write() as later:
        assert later is not session and "worked out earlier" not in later.info
        assert note not in later
        fresh = await later.get(Note, note.id)
        assert fresh is not None and fresh.body == "changed by plain SQL"


async def test_a_read_sees_only_committed_data_and_writes_nothing(database: Database) -> None:
    async with database.write() as session:
        session.add(Note(body="committed"))
    async with database.read() as session:
        assert (await session.execute(select(func.count()).select_from(Note))).scalar_one() == 1
        assert session.in_transaction()
    assert not session.in_transaction()
    assert _checked_out(database) == 0


async def test_after_commit_listeners_run_for_a_committed_write_only(database: Database) -> None:
    woken = asyncio.Event()
    signal.register(woken)
    try:
        with pytest.raises(RuntimeError):
            async with database.write() as session:
                signal.wake_workers_after_commit(session)
                raise RuntimeError("rolled back: nothing to deliver")
        assert not woken.is_set()
        async with database.write() as session:
            signal.wake_workers_after_commit(session)
            assert not woken.is_set()
        assert woken.is_set()
    finally:
        signal.unregister(woken)


async def test_concurrent_writes_all_commit(database: Database) -> None:
    async def add(i: int) -> None:
        async with database.write() as session:
            count = (await session.execute(select(func.count()).select_from(Note))).scalar_one()
            session.add(Note(body=f"{i}:{count}"))

    await asyncio.gather(*(add(i) for i in range(20)))
    assert len(await _bodies(database)) == 20


async def test_dispose_waits_for_the_transactions_in_flight(database: Database) -> None:
    started = asyncio.Event()

    async def slow_write() -> None:
        async with database.write() as session:
            session.add(Note(body="in flight"))
            await session.flush()
            started.set()
            await asyncio.sleep(0.2)

    writing = asyncio.create_task(slow_write())
    await started.wait()
    await database.dispose()
    assert writing.done() and writing.exception() is None
    assert await _bodies(database) == ["in flight"]

