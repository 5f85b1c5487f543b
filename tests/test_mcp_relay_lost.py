"""A process's listening connection (relay_listener) dropping under its open legacy SSE streams, on both shared
relays against the real store: every stream it served ends at once, closed to POSTs and its claim dropped, even
while its writer is still waiting for a client that does not read (otherwise its claim would be kept, and the
POSTs it accepted (202) answered into the void); the next stream opens a new connection and is served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import cast

import pytest
import redis
from sqlalchemy import text

from prism.auth.context import AuthContext
from prism.config import Settings
from prism.mcp_server.legacy_sse import LegacyStream, LegacyStreams
from prism.mcp_server.relay import Relay
from prism.mcp_server.relay_listener import listener_name
from prism.mcp_server.relay_postgres import PostgresRelay
from prism.mcp_server.relay_redis import RedisRelay
from prism.storage import Database
from tests.test_limits_limiter import REDIS_URL, redis_available
from tests.test_mcp_relay import Collected

AUTH = cast(AuthContext, SimpleNamespace(tenant_id="tenant", credential_kind="api_key", credential_id="key-lost"))


@pytest.fixture(params=["postgres", "redis"])
async def deployment(request: pytest.FixtureRequest, settings: Settings,
                     db: Database) -> AsyncIterator[tuple[LegacyStreams, Relay]]:
    """(this process's streams, another process's relay on the same store)."""
    other: Relay
    if request.param == "postgres":
        if db.is_sqlite:
            pytest.skip("the PostgreSQL relay needs the PostgreSQL run")
        streams = LegacyStreams(settings.model_copy(update={"redis_url": None}), db)
        other = PostgresRelay(db, Collected())
    else:
        if not redis_available():
            pytest.skip("no Redis on 127.0.0.1:6379")
        streams = LegacyStreams(settings.model_copy(update={"redis_url": REDIS_URL}), db)
        other = RedisRelay(REDIS_URL, Collected())
    try:
        yield streams, other
    finally:
        await streams.aclose()
        await other.close()


async def drop_listening_connection(streams: LegacyStreams, db: Database, stream_id: str) -> None:
    """Kill the connection this process listens on, from the store's side (as a restart or a network cut would)."""
    if isinstance(streams.relay, RedisRelay):
        with redis.Redis.from_url(REDIS_URL) as client:
            [listener] = [c for c in client.client_list() if c["name"] == listener_name()]
            assert client.client_kill_filter(_id=listener["id"]) == 1
        return
    async with db.write() as session:
        killed = (await session.execute(text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE :listen"), {"listen": f'%LISTEN "prism_sse_{stream_id}%'})).scalars().all()
    assert killed == [True]


async def wait_until_ended(streams: LegacyStreams, other: Relay, stream: LegacyStream) -> None:
    async with asyncio.timeout(10):
        # Polled: the stores offer nothing to wait on.
        while await streams.is_open_for(stream.id, AUTH) or await other.owner(stream.id) is not None:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_the_streams_of_a_dropped_listening_connection_end_at_once_and_the_next_is_served(
        deployment: tuple[LegacyStreams, Relay], db: Database) -> None:
    streams, other = deployment
    # Nobody writes these streams out: their writers would still be waiting for a client that does not read.
    opened = [await streams.open(AUTH) for _ in range(3)]
    for stream in opened:
        assert await other.owner(stream.id) is not None
    await drop_listening_connection(streams, db, opened[-1].id)

    for stream in opened:
        await wait_until_ended(streams, other, stream)
        assert stream.outbox.get_nowait() is not None  # the end marker: its writer is told to stop
    assert len(streams) == 0

    # A refresh finds nothing to write back.
    await streams.relay.refresh()
    assert [await other.owner(stream.id) for stream in opened] == [None] * 3

    # The next stream opens a new listening connection, and what another process publishes reaches it.
    fresh = await streams.open(AUTH)
    await other.publish(fresh.id, b'{"jsonrpc":"2.0","id":1,"result":{}}')
    assert await asyncio.wait_for(fresh.outbox.get(), 10) == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    await streams.close(fresh)
    assert await other.owner(fresh.id) is None
