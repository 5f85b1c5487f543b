"""Wakes this process's delivery workers as soon as a transaction that wrote deliveries commits.

Workers in other processes find them by polling (PRISM_WEBHOOK_POLL_SECONDS); within one process a fresh
event goes out without waiting for the next poll.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession

_waiters: set[asyncio.Event] = set()
_ARMED = "prism.webhooks.wake"


def register(waiter: asyncio.Event) -> None:
    _waiters.add(waiter)


def unregister(waiter: asyncio.Event) -> None:
    _waiters.discard(waiter)


def wake_workers() -> None:
    for waiter in list(_waiters):
        waiter.set()


def wake_workers_after_commit(session: AsyncSession) -> None:
    sync_session = session.sync_session
    if sync_session.info.get(_ARMED):
        return
    sync_session.info[_ARMED] = True

    def fire(committed: Any) -> None:
        committed.info.pop(_ARMED, None)
        wake_workers()

    event.listen(sync_session, "after_commit", fire, once=True)
