"""How long the event loop's thread was kept busy while a block ran, as the large-write tests judge it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

TICK_SECONDS = 0.005


@asynccontextmanager
async def loop_busy_between_ticks() -> AsyncIterator[list[float]]:
    """While the block runs, the CPU time the loop's thread spent between consecutive ticks of TICK_SECONDS: the
    process's own work holding the loop, which the machine's other jobs do not inflate as they do wall time."""
    busy: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            before = time.thread_time()
            await asyncio.sleep(TICK_SECONDS)
            busy.append(time.thread_time() - before)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.02)  # ticking before the block begins
    try:
        yield busy
    finally:
        done.set()
        await ticker
