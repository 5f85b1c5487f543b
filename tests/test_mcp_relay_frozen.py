"""A process's listening connection (relay_listener) that dies without a word, on both shared relays against the
real store: the connection runs through a TCP proxy on loopback that can freeze (it stops forwarding both ways and
closes nothing, as a network cut, a frozen peer or a NAT that forgot the connection looks from either end). Only
the ping (PRISM_MCP_SSE_RELAY_PING_SECONDS, short here) can notice: within a ping and its timeout every stream of
the connection ends, closed to POSTs and its claim dropped, and the next stream is served on a new connection.
Closing streams while the connection is frozen never hangs the process's later streams either."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy.engine import make_url

from prism.config import Settings
from prism.mcp_server.legacy_sse import LegacyStream, LegacyStreams
from prism.mcp_server.relay import Liveness, Relay
from prism.mcp_server.relay_postgres import PostgresListener, PostgresRelay
from prism.mcp_server.relay_redis import RedisRelay
from prism.mcp_server.relay_redis_listener import RedisListener
from prism.storage import Database
from tests.test_limits_limiter import REDIS_URL, redis_available
from tests.test_mcp_relay import Collected
from tests.test_mcp_relay_lost import AUTH

PING_SECONDS = 0.3
PING_TIMEOUT_SECONDS = 1.0
# Beyond a ping and its timeout: the time to end the streams and drop their claims, on a busy machine.
SLACK_SECONDS = 3.0
NOTICED_WITHIN = PING_SECONDS + PING_TIMEOUT_SECONDS + SLACK_SECONDS
ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{}}'


class FreezableProxy:
    """Forwards every connection made to it to `upstream` (host, port), byte for byte, both ways, until frozen."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """The port it listens on."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def freeze(self) -> None:
        """Stop forwarding, in both directions, on every connection; close nothing."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for pipe in self._pipes:
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        for writer in self._writers:
            writer.transport.abort()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._upstream)
        self._writers += [client_writer, upstream_writer]
        for reader, writer in ((client_reader, upstream_writer), (upstream_reader, client_writer)):
            pipe = asyncio.create_task(self._pipe(reader, writer))
            self._pipes.add(pipe)
            pipe.add_done_callback(self._pipes.discard)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while True:
                await self._flowing.wait()
                data = await reader.read(65536)
                if not data:
                    writer.write_eof()
                    return
                await self._flowing.wait()  # what was read as it froze waits too
                writer.write(data)
                await writer.drain()


@dataclass
class Deployment:
    streams: LegacyStreams  # this process's streams, listening through the proxy
    other: Relay  # another process's relay, on the store directly
    proxy: FreezableProxy


@pytest.fixture(params=["postgres", "redis"])
async def deployment(request: pytest.FixtureRequest, settings: Settings, db: Database) -> AsyncIterator[Deployment]:
    """Only the listening connection goes through the proxy: claims, lookups and publishing reach the store directly,
    as when one idle long-lived connection is cut while new ones get through."""
    fast = settings.model_copy(update={"mcp_sse_relay_ping_seconds": PING_SECONDS,
                                       "mcp_sse_relay_ping_timeout_seconds": PING_TIMEOUT_SECONDS})
    other: Relay
    if request.param == "postgres":
        if db.is_sqlite:
            pytest.skip("the PostgreSQL relay needs the PostgreSQL run")
        url = make_url(db.url)
        proxy = FreezableProxy(url.host or "127.0.0.1", url.port or 5432)
        proxied = url.set(host="127.0.0.1", port=await proxy.start()).render_as_string(hide_password=False)
        streams = LegacyStreams(fast.model_copy(update={"redis_url": None}), db)
        assert isinstance(streams.relay, PostgresRelay)
        streams.relay.listener = PostgresListener(proxied, streams, Liveness.of(fast))
        other = PostgresRelay(db, Collected())
    else:
        if not redis_available():
            pytest.skip("no Redis on 127.0.0.1:6379")
        parts = urlsplit(REDIS_URL)
        proxy = FreezableProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
        proxied = urlunsplit(parts._replace(netloc=f"127.0.0.1:{await proxy.start()}"))
        streams = LegacyStreams(fast.model_copy(update={"redis_url": REDIS_URL}), db)
        assert isinstance(streams.relay, RedisRelay)
        streams.relay.listener = RedisListener(proxied, streams, Liveness.of(fast))
        other = RedisRelay(REDIS_URL, Collected())
    try:
        yield Deployment(streams, other, proxy)
    finally:
        proxy.thaw()
        await streams.aclose()
        await other.close()
        await proxy.aclose()


async def wait_until_ended(deployment: Deployment, stream: LegacyStream) -> None:
    """The stream is closed to POSTs, on this process (checked in memory) and on any other (its claim is gone)."""
    async with asyncio.timeout(NOTICED_WITHIN):
        # Polled: the stores offer nothing to wait on.
        while (await deployment.streams.is_open_for(stream.id, AUTH)  # noqa: ASYNC110
               or await deployment.other.owner(stream.id) is not None):
            await asyncio.sleep(0.05)


async def assert_served(deployment: Deployment) -> None:
    """A new stream is claimed, and what another process publishes for it arrives."""
    async with asyncio.timeout(NOTICED_WITHIN):
        fresh = await deployment.streams.open(AUTH)
    await deployment.other.publish(fresh.id, ANSWER)
    assert await asyncio.wait_for(fresh.outbox.get(), 10) == ANSWER
    await deployment.streams.close(fresh)
    assert await deployment.other.owner(fresh.id) is None


async def test_the_streams_of_a_listening_connection_that_stops_answering_end_and_the_next_is_served(
        deployment: Deployment) -> None:
    streams, other, proxy = deployment.streams, deployment.other, deployment.proxy
    # Nobody writes these streams out: their writers would still be waiting for a client that does not read.
    opened = [await streams.open(AUTH) for _ in range(3)]
    # A connection that answers is kept, ping after ping.
    await asyncio.sleep(5 * PING_SECONDS)
    for stream in opened:
        assert await streams.is_open_for(stream.id, AUTH) and await other.owner(stream.id) is not None

    proxy.freeze()
    for stream in opened:
        await wait_until_ended(deployment, stream)
        assert stream.outbox.get_nowait() is not None  # the end marker: its writer is told to stop
    assert len(streams) == 0

    # A refresh finds nothing to write back.
    await streams.relay.refresh()
    assert [await other.owner(stream.id) for stream in opened] == [None] * 3

    proxy.thaw()
    await assert_served(deployment)


async def test_streams_closing_while_the_listening_connection_is_frozen_leave_the_next_stream_served(
        deployment: Deployment) -> None:
    streams, proxy = deployment.streams, deployment.proxy
    first, second = await streams.open(AUTH), await streams.open(AUTH)
    proxy.freeze()
    # Its unsubscription waits on the frozen connection (PostgreSQL's UNLISTEN gets no answer) until the ping
    # gives the connection up, which ends the stream still open too.
    async with asyncio.timeout(NOTICED_WITHIN):
        await streams.close(first)
    await wait_until_ended(deployment, second)

    # The last stream of a connection closes it: the close does not wait for an answer that never comes.
    proxy.thaw()
    last = await streams.open(AUTH)
    proxy.freeze()
    async with asyncio.timeout(NOTICED_WITHIN):
        await streams.close(last)
    assert await deployment.other.owner(last.id) is None

    proxy.thaw()
    await assert_served(deployment)
