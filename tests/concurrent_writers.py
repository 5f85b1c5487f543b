"""Two writers meeting on one row, as two processes would (the CLI and `prism serve`, two workers): the first
holds its transaction open until the second is waiting for it, so the second cannot have finished first."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import text

from prism.storage import Database

# Connections of the test's database waiting for a lock another transaction holds (a row lock, or a
# transaction's id: the wait of an UPDATE or of a SELECT ... FOR UPDATE alike).
WAITING_FOR_A_LOCK = text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                          "AND wait_event_type = 'Lock'")
PATIENCE_SECONDS = 10.0
# SQLite shows no waiting writer: the second one's BEGIN IMMEDIATE waits for the write lock on a thread of the
# driver. This is ample time for it to get there.
SQLITE_MOMENT_SECONDS = 0.2


async def until_waiting(db: Database, second: asyncio.Task[Any]) -> None:
    """Return once the `second` writer waits for the transaction the caller holds open on `db`'s database."""
    if db.is_sqlite:
        await asyncio.sleep(SQLITE_MOMENT_SECONDS)
    else:
        async with asyncio.timeout(PATIENCE_SECONDS):
            while not await _someone_waits(db):
                if second.done():
                    break
                await asyncio.sleep(0.01)
    if second.done():  # it did not wait: its error, if any, says why; else the test's premise is broken
        second.result()
        raise AssertionError("the second writer finished while the first held its transaction open")


async def _someone_waits(db: Database) -> bool:
    async with db.read() as session:
        return bool((await session.execute(WAITING_FOR_A_LOCK)).scalar_one())
