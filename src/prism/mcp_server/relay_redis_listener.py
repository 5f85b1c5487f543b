"""The Redis connection on which a process subscribes the channels of all its open legacy SSE streams.

One connection per process, read by one task (prism.mcp_server.relay_listener says when it opens, closes and is
given up). It is a bare connection, not the client's PubSub: that one reconnects by itself after a drop and
subscribes its channels again without a word, and the streams whose answers were published meanwhile would wait
for them for ever. Here a connection that fails is closed and never used again, and its streams are ended.

While open, it is PINGed every few seconds (relay_listener's Liveness): Redis answers a PING on a subscribed
connection too, with a `pong` array under RESP2 and a plain PONG under RESP3, among the messages the reader takes.

The connection is named `prism-mcp-sse-<host>-<pid>` (CLIENT SETNAME), so that CLIENT LIST shows which process
of the deployment holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from prism.mcp_server.relay import Liveness, StreamSink
from prism.mcp_server.relay_listener import SharedListener, listener_name

log = logging.getLogger("prism.mcp")

PREFIX = "prism:mcp:sse:"
# How long Redis may take to confirm a SUBSCRIBE; past it the connection is not trusted any more.
CONFIRM_SECONDS = 5.0


def channel(stream_id: str) -> str:
    return f"{PREFIX}{stream_id}"


@dataclass(eq=False)
class Subscriber:
    """One listening connection, from its opening to its closing: the task reading it, and the subscriptions
    waiting for Redis to confirm them."""

    connection: AbstractConnection
    reader: asyncio.Task[None] | None = None
    confirming: dict[bytes, asyncio.Future[None]] = field(default_factory=dict)
    # The PING waiting for its answer (one at a time: relay_listener sends them in turn).
    ponged: asyncio.Future[None] | None = None
    # Set once its reading failed or it was closed: nothing is sent on it any more (the connection would quietly
    # open a new socket, without the subscriptions).
    broken: bool = False


class RedisListener(SharedListener[Subscriber]):
    store = "Redis"

    def __init__(self, url: str, sink: StreamSink, liveness: Liveness) -> None:
        super().__init__(sink, liveness)
        self._url = url
        self._pool: ConnectionPool | None = None

    async def _connect(self) -> Subscriber:
        if self._pool is None:
            # Made on first use, in the process that serves (after any fork), for the name to carry its pid. No
            # retries: a connection that failed is replaced, never resumed.
            self._pool = ConnectionPool.from_url(self._url, client_name=listener_name(), socket_connect_timeout=2.0,
                                                 socket_timeout=5.0, socket_keepalive=True,
                                                 retry=Retry(NoBackoff(), 0))
        connection: AbstractConnection = self._pool.make_connection()  # type: ignore[no-untyped-call]  # untyped in redis
        try:
            await connection.connect()  # type: ignore[no-untyped-call]  # untyped in redis
        except BaseException:
            with contextlib.suppress(Exception):
                await connection.disconnect(nowait=True)
            raise
        subscriber = Subscriber(connection)
        subscriber.reader = asyncio.create_task(self._read(subscriber))
        return subscriber

    async def _subscribe(self, subscriber: Subscriber, stream_id: str) -> None:
        if subscriber.broken:
            raise ConnectionError("the Redis connection listening for legacy SSE streams dropped")
        name = channel(stream_id).encode()
        confirmed = asyncio.get_running_loop().create_future()
        subscriber.confirming[name] = confirmed
        try:
            await subscriber.connection.send_command("SUBSCRIBE", name)
            async with asyncio.timeout(CONFIRM_SECONDS):
                await confirmed
        finally:
            subscriber.confirming.pop(name, None)

    async def _unsubscribe(self, subscriber: Subscriber, stream_id: str) -> None:
        if not subscriber.broken:
            await subscriber.connection.send_command("UNSUBSCRIBE", channel(stream_id))

    async def _ping(self, subscriber: Subscriber) -> None:
        if subscriber.broken:
            raise ConnectionError("the Redis connection listening for legacy SSE streams dropped")
        subscriber.ponged = asyncio.get_running_loop().create_future()
        try:
            await subscriber.connection.send_command("PING")
            await subscriber.ponged
        finally:
            subscriber.ponged = None

    def _abandon(self, subscriber: Subscriber) -> None:
        subscriber.broken = True
        waiting = [*subscriber.confirming.values(), subscriber.ponged]
        for answered in waiting:
            if answered is not None and not answered.done():
                answered.set_exception(ConnectionError("the Redis connection listening for legacy SSE streams "
                                                       "was given up before it answered"))

    async def _disconnect(self, subscriber: Subscriber) -> None:
        subscriber.broken = True
        reader = subscriber.reader
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
            await asyncio.wait([reader])
        with contextlib.suppress(Exception):  # its reader is gone: waiting for the close cannot deadlock
            await subscriber.connection.disconnect()

    async def _read(self, subscriber: Subscriber) -> None:
        """Hand every message to the sink and every confirmation to its subscription, until the connection fails
        (or is closed: this task is then cancelled)."""
        try:
            while True:
                # push_request: under RESP3 (the client's default) messages and confirmations are pushes, which
                # a plain read would hand to the client's own push handler instead of returning them.
                reply = await subscriber.connection.read_response(timeout=math.inf, disconnect_on_error=False,
                                                                  push_request=True)
                self._dispatch(subscriber, reply)
        except Exception:  # whatever it was, the connection can no longer be trusted
            log.debug("the Redis connection listening for legacy SSE streams failed", exc_info=True)
        # lose() gives it up at once (failing a subscription that holds the lock while it waits for its
        # confirmation), before waiting for that lock.
        await self.lose(subscriber)

    def _dispatch(self, subscriber: Subscriber, reply: Any) -> None:
        if reply == b"PONG" or (isinstance(reply, list) and len(reply) == 2 and reply[0] == b"pong"):
            if subscriber.ponged is not None and not subscriber.ponged.done():
                subscriber.ponged.set_result(None)
            return
        if not isinstance(reply, list) or len(reply) != 3:
            return
        kind, name, data = reply
        if kind == b"message":
            self._sink.deliver(name.decode().removeprefix(PREFIX), data)
        elif kind == b"subscribe":
            confirmed = subscriber.confirming.get(name)
            if confirmed is not None and not confirmed.done():
                confirmed.set_result(None)
