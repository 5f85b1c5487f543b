"""The legacy SSE relay over PostgreSQL: a claim row per open stream, and LISTEN/NOTIFY on a channel per stream.

Claims are rows of `mcp_legacy_streams` (prism.mcp_server.models) written through the process's pool. The
notifications of this process's streams arrive on ONE connection of its own (asyncpg's `add_listener` on the
driver connection of a pool-less engine), opened with the process's first open stream and closed with its last;
each stream LISTENs on `prism_sse_<stream id>` while it is open. Its application_name is
`prism-mcp-sse-<host>-<pid>`, as the Redis listening connection's name, so that pg_stat_activity shows which process
holds it. Should that connection drop, or not answer a query (`SELECT 1`, every few seconds) in time, every stream
it served is ended, so its clients reconnect rather than wait for answers that can no longer come
(prism.mcp_server.relay_listener, shared with the Redis relay).

A NOTIFY payload holds at most 8000 bytes and answers (a page of tools, a report) are often larger, so a message
goes out as numbered chunks of at most CHUNK_BYTES, all from one transaction: PostgreSQL delivers the
notifications of a transaction together and in the order they were sent, and the owner joins them again.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, bindparam, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.types import Text

from prism.mcp_server.models import LegacyStreamClaim as Claim
from prism.mcp_server.relay import (
    DEFAULT_LIVENESS,
    STREAM_TTL_SECONDS,
    Liveness,
    RelayUnavailable,
    StreamOwner,
    StreamSink,
)
from prism.mcp_server.relay_listener import SharedListener, listener_name
from prism.mcp_server.relay_shared import SharedRelay
from prism.storage import Database, one_shot_engine

log = logging.getLogger("prism.mcp")

CHANNEL_PREFIX = "prism_sse_"
# Payload room left for JSON once the chunk's header (`<message id>:<index>:<count>:`) is in.
CHUNK_BYTES = 7800
# Messages whose chunks are still arriving, at most: chunks of one message come back to back, so more than one
# at a time only happens when a connection dropped mid-message; the oldest is then given up.
MAX_PARTIAL_MESSAGES = 8
# How long closing the listening connection may wait for PostgreSQL to see it off; past it, the socket is dropped
# (a connection that stopped answering would otherwise hold the closing, and every stream opening after it, for ever).
CLOSE_SECONDS = 2.0
# The chunks of one message, in order, in one round trip (volatile calls in a sorted SELECT run after the sort).
_NOTIFY = text("SELECT pg_notify(:channel, c.chunk) FROM unnest(:chunks) WITH ORDINALITY AS c(chunk, n) "
               "ORDER BY c.n").bindparams(bindparam("chunks", type_=ARRAY(Text)))


def chunks(message: bytes, size: int = CHUNK_BYTES) -> list[str]:
    """`message` (UTF-8 JSON) in pieces of at most `size` bytes, never cutting a character in two."""
    pieces: list[str] = []
    start = 0
    while start < len(message):
        end = min(start + size, len(message))
        while end < len(message) and message[end] & 0xC0 == 0x80:  # a continuation byte: back off
            end -= 1
        pieces.append(message[start:end].decode())
        start = end
    return pieces


class _Partials:
    """Chunks of the messages whose last chunk has not arrived yet, bounded by MAX_PARTIAL_MESSAGES."""

    def __init__(self) -> None:
        self._parts: dict[str, list[str]] = {}

    def add(self, payload: str) -> bytes | None:
        """The whole message once `payload` completes it; None while chunks are missing (or it is malformed)."""
        message_id, index, count, data = payload.split(":", 3)
        if count == "1":
            return data.encode()
        parts = self._parts.setdefault(message_id, [])
        if int(index) != len(parts):  # a chunk went missing: the message can never be whole
            del self._parts[message_id]
            return None
        parts.append(data)
        if len(parts) == int(count):
            del self._parts[message_id]
            return "".join(parts).encode()
        while len(self._parts) > MAX_PARTIAL_MESSAGES:
            del self._parts[next(iter(self._parts))]
        return None


@dataclass(eq=False)
class ListeningConnection:
    """One listening connection, from its opening to its closing: the pool-less engine it came from, and asyncpg's
    connection under it (the one notifications arrive on)."""

    engine: AsyncEngine
    connection: AsyncConnection
    driver: Any


class PostgresListener(SharedListener[ListeningConnection]):
    """LISTEN on one connection of the process's own (relay_listener), joining the chunks of each message. `url` is
    the database's."""

    store = "PostgreSQL"

    def __init__(self, url: str, sink: StreamSink, liveness: Liveness) -> None:
        super().__init__(sink, liveness)
        self._url = url
        self._partials = _Partials()

    async def _connect(self) -> ListeningConnection:
        engine = one_shot_engine(self._url)
        try:
            connection = await engine.connect()
            driver = (await connection.get_raw_connection()).driver_connection
            if driver is None:
                raise RuntimeError("the pool handed out a connection without its driver connection")
            await driver.execute("SELECT set_config('application_name', $1, false)", listener_name())
        except BaseException:
            await engine.dispose()
            raise
        listening = ListeningConnection(engine, connection, driver)

        async def terminated(_driver: Any) -> None:
            await self.lose(listening)

        driver.add_termination_listener(terminated)
        return listening

    async def _subscribe(self, connection: ListeningConnection, stream_id: str) -> None:
        await connection.driver.add_listener(CHANNEL_PREFIX + stream_id, self._on_notification)

    async def _unsubscribe(self, connection: ListeningConnection, stream_id: str) -> None:
        await connection.driver.remove_listener(CHANNEL_PREFIX + stream_id, self._on_notification)

    async def _ping(self, connection: ListeningConnection) -> None:
        await connection.driver.execute("SELECT 1")

    def _abandon(self, connection: ListeningConnection) -> None:
        connection.driver.terminate()

    async def _disconnect(self, connection: ListeningConnection) -> None:
        # asyncpg's own close, bounded (it drops the socket when PostgreSQL does not see it off in time); SQLAlchemy's
        # close after it has nothing left to wait for.
        with contextlib.suppress(Exception):
            await connection.driver.close(timeout=CLOSE_SECONDS)
        with contextlib.suppress(Exception):
            await connection.connection.close()
        with contextlib.suppress(Exception):
            await connection.engine.dispose()

    def _on_notification(self, _connection: Any, _pid: int, channel: str, payload: str) -> None:
        try:
            message = self._partials.add(payload)
        except ValueError:
            log.warning("ignored a malformed notification on %s", channel)
            return
        if message is not None:
            self._sink.deliver(channel.removeprefix(CHANNEL_PREFIX), message)


class PostgresRelay(SharedRelay):
    store = "PostgreSQL"
    unreachable = (Exception,)  # whatever the driver, the pool or SQLAlchemy raise on the way

    def __init__(self, db: Database, sink: StreamSink, liveness: Liveness = DEFAULT_LIVENESS) -> None:
        super().__init__(PostgresListener(db.url, sink, liveness))
        self._db = db

    async def owner(self, stream_id: str) -> StreamOwner | None:
        try:
            async with self._db.read() as session:
                row = (await session.execute(select(Claim.tenant_id, Claim.credential_kind, Claim.credential_id)
                                             .where(Claim.id == stream_id, Claim.expires_at > func.now()))).first()
        except Exception as exc:
            raise RelayUnavailable() from exc
        return StreamOwner(row.tenant_id, row.credential_kind, row.credential_id) if row is not None else None

    async def publish(self, stream_id: str, message: bytes) -> None:
        message_id = secrets.token_hex(8)
        pieces = chunks(message)
        payloads = [f"{message_id}:{i}:{len(pieces)}:{piece}" for i, piece in enumerate(pieces)]
        try:
            async with self._db.write() as session:
                await session.execute(_NOTIFY, {"channel": CHANNEL_PREFIX + stream_id, "chunks": payloads})
        except Exception as exc:
            raise RelayUnavailable() from exc

    async def _extend(self, stream_ids: list[str]) -> list[str]:
        if not stream_ids:
            return []
        async with self._db.write() as session:
            extended = set((await session.execute(
                update(Claim).where(Claim.id.in_(stream_ids)).values(expires_at=_expiry()).returning(Claim.id),
            )).scalars())
        return [stream_id for stream_id in stream_ids if stream_id not in extended]

    async def _record(self, owners: dict[str, StreamOwner]) -> None:
        # The claims of processes that died on the way are purged with it, so the table holds only what is open.
        async with self._db.write() as session:
            await session.execute(delete(Claim).where(Claim.expires_at < func.now()))
            for stream_id, owner in owners.items():
                await session.execute(postgresql_insert(Claim).values(
                    id=stream_id, tenant_id=owner.tenant_id, credential_kind=owner.credential_kind,
                    credential_id=owner.credential_id, expires_at=_expiry(),
                ).on_conflict_do_update(index_elements=[Claim.id], set_={"expires_at": _expiry()}))

    async def _drop(self, stream_id: str) -> None:
        async with self._db.write() as session:
            await session.execute(delete(Claim).where(Claim.id == stream_id))


def _expiry() -> ColumnElement[Any]:
    # The database's clock, not this host's: every process of the deployment judges expiry by the same one.
    return func.now() + timedelta(seconds=STREAM_TTL_SECONDS)
