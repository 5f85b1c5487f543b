"""Kept-open sessions to upstream MCP servers: one per event loop, URL, transport, connection and credential.

Opening a session costs a TLS handshake and the initialize exchange — several round trips more than the call
itself. A session is opened by the first call that needs it and kept by a task of its own (the `mcp` client's
context must be entered and left in one task); calls use it concurrently (JSON-RPC requests carry their ids).
It is closed after IDLE_SECONDS without a call, when a call through it fails or times out, when the upstream
refuses a call as not of a session it knows (HTTP 404: it restarted, or expired the session) or no longer accepts
its credential (401, 403: an expired token) — the next call opens a new one — and at shutdown. A changed
connection (URL, credential) is another key, so it gets a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from prism.config import Settings
from prism.integrations.credentials import Credential

IDLE_SECONDS = 60.0
Key = tuple[str, str, str, str, bool, str | None]
# What opens a session: called with what to do when the upstream says its tool list changed, and when it refuses a
# tool call at the session's level (`PooledSession.lost`).
Opener = Callable[[Callable[[], None], Callable[[], None]], Any]


@dataclass(eq=False, slots=True)
class Calling:
    """One tool call through a session: `alone` while no other tool call went through it at the same time."""

    alone: bool = True


class PooledSession:
    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self.client: Any = None
        self.changed = False  # notifications/tools/list_changed arrived since a caller last looked
        # The upstream refused a tool call through it before running it: an unknown session (404) or a credential
        # it no longer accepts (401, 403). Every later call would be refused the same way.
        self.lost = False
        self._calls: set[Calling] = set()
        self.last_used = time.monotonic()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._hold())

    def _list_changed(self) -> None:
        self.changed = True

    def _lost(self) -> None:
        self.lost = True

    @contextlib.contextmanager
    def calling(self) -> Iterator[Calling]:
        """A tool call through this session, told whether another overlapped it (then a refusal of one of them is
        not known to be its own)."""
        mine = Calling(alone=not self._calls)
        for other in self._calls:
            other.alone = False
        self._calls.add(mine)
        try:
            yield mine
        finally:
            self._calls.discard(mine)

    async def _hold(self) -> None:
        try:
            async with self._opener(self._list_changed, self._lost) as client:
                self.client = client
                self._ready.set_result(None)
                while not self._closing.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._closing.wait(), timeout=IDLE_SECONDS / 4)
                    if time.monotonic() - self.last_used > IDLE_SECONDS:
                        break
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("closed"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.client = None

    async def ready(self) -> Any:
        await asyncio.shield(self._ready)
        if self.client is None:
            raise ConnectionError("the upstream session closed")
        self.last_used = time.monotonic()
        return self.client

    async def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(self.task, timeout=5)


_POOLS: WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Key, PooledSession]] = WeakKeyDictionary()


def key_of(settings: Settings, url: str, transport: str, connection_id: str, credential: Credential) -> Key:
    secret = hashlib.sha256(f"{credential.kind}\0{credential.settings}\0{credential.secret}".encode()).hexdigest()
    return (url, transport, connection_id, secret, settings.webhook_allow_private_networks,
            settings.webhook_ca_bundle)


def pooled(key: Key, opener: Opener) -> PooledSession:
    pool = _POOLS.setdefault(asyncio.get_running_loop(), {})
    found = pool.get(key)
    if found is None or found.task.done() or found.lost:
        found = pool[key] = PooledSession(opener)
    return found


async def discard(key: Key, session: PooledSession) -> None:
    pool = _POOLS.get(asyncio.get_running_loop(), {})
    if pool.get(key) is session:
        del pool[key]
    await session.close()


async def close_all() -> None:
    for session in list(_POOLS.pop(asyncio.get_running_loop(), {}).values()):
        await session.close()
