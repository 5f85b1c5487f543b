"""The one connection on which a process listens for all of its open legacy SSE streams (PostgreSQL and Redis).

A process may hold thousands of open streams, and a connection each would exhaust the store's connections. So
each process opens ONE listening connection with its first open stream, subscribes each stream's channel on it
as the stream opens and unsubscribes it as the stream closes, and closes the connection with its last stream.

That connection is trusted whole or not at all. When it drops, or a subscription on it fails, whatever was
published meanwhile is gone and nothing tells which stream missed what: every stream it served is ended
(StreamSink.lost), so its client reconnects instead of waiting for answers that will never come, and the next
stream to open opens a new connection. Resubscribing the old streams quietly would keep them open with answers
missing.

A connection can also die without a word: a network cut, a frozen peer, a NAT or a failover forgetting it, and no
FIN or RST ever arrives. TCP keepalive would notice only after hours, and meanwhile the streams' claims are renewed
and their POSTs accepted (202) with answers that never arrive. So while the connection is open it is asked for a
round trip every `Liveness.every` seconds (PING on Redis, a trivial query on PostgreSQL); one that does not answer
within `Liveness.timeout` is lost like one that dropped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar

from prism.mcp_server.relay import Liveness, StreamSink

log = logging.getLogger("prism.mcp")

Connection = TypeVar("Connection")
NAME_PREFIX = "prism-mcp-sse-"


def listener_name() -> str:
    """This process's name for its listening connection, shown by the store (Redis CLIENT LIST, PostgreSQL
    pg_stat_activity.application_name) so that an operator sees which process holds it. Printable ASCII without
    spaces, as Redis requires."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())
    return f"{NAME_PREFIX}{host}-{os.getpid()}"


class SharedListener(ABC, Generic[Connection]):
    """The listening connection of a process and the streams subscribed on it. `Connection` is whatever stands for
    one connection, from its opening to its closing: a connection that dropped is never used again."""

    store: ClassVar[str]  # for the logs

    def __init__(self, sink: StreamSink, liveness: Liveness) -> None:
        self._sink = sink
        self._liveness = liveness
        self._connection: Connection | None = None
        # The task pinging the connection, while there is one.
        self._watchdog: asyncio.Task[None] | None = None
        self._listening: set[str] = set()
        # One opening, subscription, unsubscription, ping or closing of the connection at a time.
        self._lock = asyncio.Lock()

    async def listen(self, stream_id: str) -> None:
        """Hand the stream's messages to the sink from now on, opening the connection if this is the first stream.
        Raises when the store cannot be reached; a subscription that failed ends the streams of its connection."""
        connection: Connection | None = None
        try:
            async with self._lock:
                if self._connection is None:
                    self._connection = await self._connect()
                    self._watchdog = asyncio.create_task(self._watch(self._connection))
                connection = self._connection
                await self._subscribe(connection, stream_id)
                self._listening.add(stream_id)
        except Exception:
            if connection is not None:
                await self.lose(connection)
            raise

    async def unlisten(self, stream_id: str) -> None:
        """Stop listening for the stream, closing the connection with the last one; never raises (a connection that
        failed to unsubscribe has dropped, and its loss is handled as any other)."""
        async with self._lock:
            if stream_id not in self._listening:
                return
            self._listening.discard(stream_id)
            if not self._listening:
                await self._close_connection()
            elif self._connection is not None:
                try:
                    await self._unsubscribe(self._connection, stream_id)
                except Exception:
                    log.debug("could not unsubscribe legacy SSE stream %s", stream_id, exc_info=True)

    async def lose(self, connection: Connection) -> None:
        """The connection dropped or can no longer be trusted: close it and end every stream it served. Nothing
        when it is no longer this process's connection (closed on purpose, or already lost)."""
        if connection is self._connection:
            # At once, before waiting for the lock: whatever holds it may be waiting on this very connection.
            self._abandon(connection)
        async with self._lock:
            if connection is not self._connection:
                return
            lost = sorted(self._listening)
            self._listening.clear()
            await self._close_connection()
        log.warning("the %s connection listening for %d legacy SSE stream(s) dropped; ending them", self.store,
                    len(lost))
        for stream_id in lost:
            self._sink.lost(stream_id)

    async def close(self) -> None:
        async with self._lock:
            self._listening.clear()
            await self._close_connection()

    def listening(self) -> frozenset[str]:
        """The streams this process listens for."""
        return frozenset(self._listening)

    @property
    def connected(self) -> bool:
        """Whether this process holds its listening connection (only while one of its streams is open)."""
        return self._connection is not None

    async def _close_connection(self) -> None:
        connection, self._connection = self._connection, None  # first: its end is no surprise now
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog is not asyncio.current_task():
            watchdog.cancel()
            await asyncio.wait([watchdog])
        if connection is not None:
            await self._disconnect(connection)

    async def _watch(self, connection: Connection) -> None:
        """Ask the connection for a round trip every `every` seconds while it is this process's connection, and lose
        it the first time it does not answer in time, or fails to. Cancelled when it is closed."""
        while True:
            await asyncio.sleep(self._liveness.every)
            ping = asyncio.create_task(self._ping_in_turn(connection))
            try:
                await asyncio.wait([ping], timeout=self._liveness.timeout)
            except asyncio.CancelledError:
                ping.cancel()  # it can only be waiting for the lock, held by whoever closes the connection
                raise
            if not ping.done():
                log.warning("the %s connection listening for legacy SSE streams did not answer a ping within %g s",
                            self.store, self._liveness.timeout)
                # Given up before the ping is cancelled, so that the request fails at once instead of being cancelled
                # mid-way (asyncpg would open another connection to cancel it, towards a peer that does not answer).
                self._abandon(connection)
                ping.cancel()
                await asyncio.wait([ping])
                break
            try:
                if not ping.result():
                    return
            except Exception:
                log.warning("the %s connection listening for legacy SSE streams failed a ping", self.store,
                            exc_info=True)
                break
        await self.lose(connection)

    async def _ping_in_turn(self, connection: Connection) -> bool:
        """One round trip, between subscriptions (a connection carries one request at a time); False when the
        connection is no longer this process's (nothing left to watch)."""
        async with self._lock:
            if connection is not self._connection:
                return False
            await self._ping(connection)
            return True

    @abstractmethod
    async def _connect(self) -> Connection:
        """A new listening connection, watched: its loss calls `lose` with it."""

    @abstractmethod
    async def _subscribe(self, connection: Connection, stream_id: str) -> None:
        """Subscribe the stream's channel; return once messages published to it will arrive."""

    @abstractmethod
    async def _unsubscribe(self, connection: Connection, stream_id: str) -> None:
        """Unsubscribe the stream's channel."""

    @abstractmethod
    async def _ping(self, connection: Connection) -> None:
        """One round trip on the connection; return once it answered."""

    @abstractmethod
    def _abandon(self, connection: Connection) -> None:
        """Stop trusting the connection now: whatever waits on it fails at once, and nothing is sent on it any more
        (it is closed later, with `_disconnect`)."""

    @abstractmethod
    async def _disconnect(self, connection: Connection) -> None:
        """Close the connection, in bounded time even when it no longer answers; never raises."""
