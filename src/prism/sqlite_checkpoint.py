"""SQLite WAL checkpoints off the event loop's thread.

Prism runs SQLite calls inline on the event loop's thread (prism.sqlite_inline). With SQLite's automatic
checkpoint, the commit that crosses 1,000 WAL pages copies them into the database file and fsyncs it —
on the loop, stalling every request in flight (tens to hundreds of milliseconds on a virtual disk). So
`Database` turns the automatic checkpoint off on its connections and runs a `WalCheckpointer` instead:

1. A few times a second, a PASSIVE checkpoint on a worker thread, with a connection of its own. PASSIVE
   never waits for readers or writers, and the sqlite3 module releases the GIL while it works, so the
   loop goes on serving, writes included. This does the bulk of the copying and of the fsync.
2. Under steady writes that checkpoint never quite catches up (new frames arrive while it copies), and
   SQLite only starts the WAL again from its beginning once a checkpoint has copied all of it. So when the
   WAL holds more than `RESTART_FRAMES`, the checkpointer takes this process's writer lock — writers wait
   on an asyncio lock, the loop keeps running — and checkpoints the few frames left. The next writer then
   starts the WAL again, and the file stays as small as with the automatic checkpoint.

A process that stops without `stop()` (killed) leaves an un-checkpointed WAL, as SQLite always may; the
next connection to the file recovers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3

log = logging.getLogger("prism.db")

# How often the WAL is looked at; at this pace a checkpoint copies a few thousand requests' pages.
CHECKPOINT_INTERVAL_SECONDS = 0.25
# SQLite's own automatic checkpoint threshold: beyond it, writers are held back for a catch-up.
RESTART_FRAMES = 1000


class WalCheckpointer:
    """Checkpoints the WAL of the SQLite file at `path` until stopped; `writers` is the process's writer lock."""

    def __init__(self, path: str, writers: asyncio.Lock, *, busy_timeout_seconds: float,
                 interval_seconds: float = CHECKPOINT_INTERVAL_SECONDS) -> None:
        self.path = path
        self.writers = writers
        self.busy_timeout_seconds = busy_timeout_seconds
        self.interval_seconds = interval_seconds
        self._conn: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start checkpointing, from the running loop; a no-op when already started."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="prism-sqlite-checkpoint")

    async def stop(self) -> None:
        """Stop after one last checkpoint of everything written."""
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.to_thread(self._checkpoint)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_seconds)
            frames_in_wal = await asyncio.to_thread(self._checkpoint)
            if frames_in_wal > RESTART_FRAMES:
                async with self.writers:
                    await asyncio.to_thread(self._checkpoint)

    def _checkpoint(self) -> int:
        """Run a PASSIVE checkpoint; the number of frames the WAL held (0 when there is none or it failed)."""
        if not os.path.exists(self.path + "-wal"):  # nothing written since the last connection closed
            return 0
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self.path, timeout=self.busy_timeout_seconds, isolation_level=None,
                                             check_same_thread=False)
            _busy, frames, _copied = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            return int(frames)
        except sqlite3.Error as exc:  # e.g. the file went away under a test; the next round tries again
            log.warning("SQLite checkpoint failed: %s", exc)
            return 0
