"""Legacy SSE streams across processes: who owns a stream, and how an answer reaches the process holding it.

A legacy stream is one long HTTP response, held by the process that opened it; the client then POSTs its
messages to `?session_id=<stream>`, and behind a load balancer (or `prism serve --workers N`) those POSTs land
on any process. The process a POST lands on checks the stream's claim (open, and opened by this same tenant
and credential), runs the messages through its own dispatcher, and publishes each JSON-RPC answer on the
stream's channel; the owning process, subscribed to that channel while the stream is open, writes it out.

Three relays, chosen by configuration (`relay_for`), so that nothing is shared where nothing needs to be:

- Redis (PRISM_REDIS_URL set): a key with a TTL per stream, pub/sub (prism.mcp_server.relay_redis);
- PostgreSQL (the database, without Redis): a row per stream, LISTEN/NOTIFY (prism.mcp_server.relay_postgres);
- in-process (SQLite, which serves from one process): the open streams of this process are all there is.

Both shared relays listen for all of a process's streams on one connection of its own
(prism.mcp_server.relay_listener), and end every stream it served when it drops or stops answering (Liveness).

A claim lives STREAM_TTL_SECONDS past its last refresh, and the owner refreshes it every REFRESH_SECONDS, so
a process that died without closing its streams stops answering for them within a minute. A refresh only extends
claims that exist; one that lapsed while its stream stayed open is recorded again, but only under the order
HeldClaims keeps, so that the claim of a stream that closed meanwhile is never written back (its POSTs would be
accepted, and their answers lost, until that claim expired).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from prism.auth.context import AuthContext
from prism.config import Settings
from prism.storage import DatabaseUnavailable

if TYPE_CHECKING:
    from prism.storage import Database

STREAM_TTL_SECONDS = 60
REFRESH_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class Liveness:
    """How often a process's listening connection (prism.mcp_server.relay_listener) must answer a round trip, and
    how long it has to answer (a subscription in progress, which it waits for, included)."""

    every: float = 15.0
    timeout: float = 5.0

    @classmethod
    def of(cls, settings: Settings) -> Liveness:
        return cls(settings.mcp_sse_relay_ping_seconds, settings.mcp_sse_relay_ping_timeout_seconds)


DEFAULT_LIVENESS = Liveness()


@dataclass(frozen=True, slots=True)
class StreamOwner:
    """The credential a stream was opened with: only the same one may post to it."""

    tenant_id: str
    credential_kind: str
    credential_id: str

    @classmethod
    def of(cls, auth: AuthContext) -> StreamOwner:
        return cls(auth.tenant_id, auth.credential_kind, auth.credential_id)

    def matches(self, auth: AuthContext) -> bool:
        return self == StreamOwner.of(auth)


class StreamSink(Protocol):
    """The owning process's side: where a relay hands what arrives for one of its streams."""

    def deliver(self, stream_id: str, message: bytes) -> None:
        """One JSON-RPC message (JSON bytes) for the stream, to be written on it."""

    def lost(self, stream_id: str) -> None:
        """The relay can no longer bring messages to this stream: end it, so the client reconnects."""


class RelayUnavailable(DatabaseUnavailable):
    """The store the streams are shared through (PostgreSQL or Redis) cannot be reached: 503, Retry-After.

    A kind of DatabaseUnavailable so that every door renders it as it renders an unreachable database."""

    code = "relay_unavailable"

    def __init__(self) -> None:
        super().__init__("legacy SSE streams cannot be shared between processes right now; try again shortly")


class Relay(Protocol):
    # False for the in-process relay: there is no claim to refresh and no one else to publish to.
    shared: bool

    async def claim(self, stream_id: str, owner: StreamOwner) -> None:
        """Subscribe to the stream's channel, then record the claim: once this returns, a POST landing on any
        process finds the stream and its answers reach this one. RelayUnavailable when the store is down."""

    async def refresh(self) -> None:
        """Push the claims of this process's open streams forward by STREAM_TTL_SECONDS, recording again any that
        lapsed while its stream stayed open (the store was out of reach longer than a claim lasts), never one whose
        stream closed. RelayUnavailable when the store is down."""

    async def release(self, stream_id: str) -> None:
        """Unsubscribe and drop the claim; never raises (an unreleased claim expires by itself)."""

    async def owner(self, stream_id: str) -> StreamOwner | None:
        """Who the stream was opened for, if it is open in some process. RelayUnavailable when the store is down."""

    async def publish(self, stream_id: str, message: bytes) -> None:
        """Send one JSON-RPC message to the process holding the stream. RelayUnavailable when the store is down."""

    async def close(self) -> None:
        """Release every claim still held and close the relay's connections."""


class HeldClaims:
    """The claims a shared relay holds for this process's open streams, and the order that keeps a closed stream
    closed. A claim is written (when its stream opens, or again after it lapsed) only by a holder of `writing`
    that finds its stream still held, and dropped by a holder of `writing` that let go of it first: whichever
    comes second, the stream ends up unclaimed once closed. Extending a claim needs no lock, as long as the
    store's extension never creates one (a stream id is 160 random bits: only the process that drew it writes
    its claim)."""

    def __init__(self) -> None:
        self._owners: dict[str, StreamOwner] = {}
        self.writing = asyncio.Lock()

    def ids(self) -> list[str]:
        return list(self._owners)

    def hold(self, stream_id: str, owner: StreamOwner) -> None:
        """Call under `writing`, once the claim is written."""
        self._owners[stream_id] = owner

    def let_go(self, stream_id: str) -> None:
        """Call under `writing`, before the claim is dropped."""
        self._owners.pop(stream_id, None)

    def still_held(self, stream_ids: Iterable[str]) -> dict[str, StreamOwner]:
        """Of these streams, those still open here, with their owners. Call under `writing`, and write their
        claims before letting it go."""
        return {stream_id: self._owners[stream_id] for stream_id in stream_ids if stream_id in self._owners}


class InProcessRelay:
    """One process serves every request (SQLite): a stream not open here is not open anywhere."""

    shared = False

    async def claim(self, stream_id: str, owner: StreamOwner) -> None:
        return None

    async def refresh(self) -> None:
        return None

    async def release(self, stream_id: str) -> None:
        return None

    async def owner(self, stream_id: str) -> StreamOwner | None:
        return None

    async def publish(self, stream_id: str, message: bytes) -> None:
        return None

    async def close(self) -> None:
        return None


def relay_for(settings: Settings, db: Database, sink: StreamSink) -> Relay:
    """Redis when configured (it is built for this, and spares the database), else PostgreSQL when that is the
    database, else in-process."""
    if settings.redis_url:
        from prism.mcp_server.relay_redis import RedisRelay  # only deployments with Redis import the client

        return RedisRelay(settings.redis_url, sink, Liveness.of(settings))
    if not db.is_sqlite:
        from prism.mcp_server.relay_postgres import PostgresRelay

        return PostgresRelay(db, sink, Liveness.of(settings))
    return InProcessRelay()
