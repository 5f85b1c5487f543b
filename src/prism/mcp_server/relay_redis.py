"""The legacy SSE relay over Redis: a claim key with a TTL per open stream, and pub/sub on a channel per stream.

    prism:mcp:sse:claim:<stream id>    {"tenant_id", "credential_kind", "credential_id"}, expires STREAM_TTL_SECONDS
                                       after the owner's last refresh
    prism:mcp:sse:<stream id>          the channel answers for the stream are published on

Each open stream has its own subscription (one Redis connection, read by one task), made before the stream
announces its endpoint and closed with the stream: nothing outlives it, and a subscription that fails ends
only its own stream. Commands (claims, lookups, publishing) share one client with short timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from prism.mcp_server.relay import STREAM_TTL_SECONDS, HeldClaims, RelayUnavailable, StreamOwner, StreamSink

log = logging.getLogger("prism.mcp")

PREFIX = "prism:mcp:sse:"


def claim_key(stream_id: str) -> str:
    return f"{PREFIX}claim:{stream_id}"


def channel(stream_id: str) -> str:
    return f"{PREFIX}{stream_id}"


class RedisRelay:
    shared = True

    def __init__(self, url: str, sink: StreamSink) -> None:
        self._sink = sink
        # Commands wait at most this long for a Redis that went away: the POST then answers 503.
        self._commands = Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=5.0)
        # A subscription waits for messages as long as its stream is open: no read timeout there.
        self._subscriber = Redis.from_url(url, socket_connect_timeout=2.0)
        # The task reading each open stream's subscription; the subscription closes when its task ends.
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._claims = HeldClaims()

    async def claim(self, stream_id: str, owner: StreamOwner) -> None:
        pubsub = self._subscriber.pubsub(ignore_subscribe_messages=True)
        subscribed = asyncio.get_running_loop().create_future()
        self._readers[stream_id] = asyncio.create_task(self._read(stream_id, pubsub, subscribed))
        try:
            await subscribed
            async with self._claims.writing:
                await self._record({stream_id: owner})
                self._claims.hold(stream_id, owner)
        except (RedisError, OSError) as exc:
            log.warning("could not claim legacy SSE stream %s in Redis", stream_id, exc_info=True)
            await self._stop_reading(stream_id)
            raise RelayUnavailable() from exc

    async def refresh(self) -> None:
        try:
            lapsed = await self._extend(self._claims.ids())
            if lapsed:
                await self._restore(lapsed)
        except (RedisError, OSError) as exc:
            raise RelayUnavailable() from exc

    async def release(self, stream_id: str) -> None:
        await self._stop_reading(stream_id)
        async with self._claims.writing:
            self._claims.let_go(stream_id)
            try:
                await self._commands.delete(claim_key(stream_id))
            except (RedisError, OSError):
                log.warning("could not drop the claim of legacy SSE stream %s; it expires by itself", stream_id,
                            exc_info=True)

    async def owner(self, stream_id: str) -> StreamOwner | None:
        try:
            value = await self._commands.get(claim_key(stream_id))
        except (RedisError, OSError) as exc:
            raise RelayUnavailable() from exc
        if value is None:
            return None
        fields = orjson.loads(value)
        return StreamOwner(fields["tenant_id"], fields["credential_kind"], fields["credential_id"])

    async def publish(self, stream_id: str, message: bytes) -> None:
        try:
            await self._commands.publish(channel(stream_id), message)
        except (RedisError, OSError) as exc:
            raise RelayUnavailable() from exc

    async def close(self) -> None:
        for stream_id in list(self._readers):
            await self.release(stream_id)
        await self._subscriber.aclose()
        await self._commands.aclose()

    async def _extend(self, stream_ids: list[str]) -> list[str]:
        """Push these claims forward, EXPIRE touching only keys that exist (a claim dropped meanwhile stays
        dropped); the ids of those that no longer exist."""
        async with self._commands.pipeline(transaction=False) as pipe:
            for stream_id in stream_ids:
                pipe.expire(claim_key(stream_id), STREAM_TTL_SECONDS)
            extended = await pipe.execute()
        return [stream_id for stream_id, done in zip(stream_ids, extended, strict=True) if not done]

    async def _restore(self, lapsed: list[str]) -> None:
        """Record again the claims that lapsed while their streams stayed open (HeldClaims)."""
        async with self._claims.writing:
            await self._record(self._claims.still_held(lapsed))

    async def _record(self, owners: dict[str, StreamOwner]) -> None:
        """Write these claims (call under `writing`)."""
        async with self._commands.pipeline(transaction=False) as pipe:
            for stream_id, owner in owners.items():
                pipe.set(claim_key(stream_id), _claim_value(owner), ex=STREAM_TTL_SECONDS)
            await pipe.execute()

    async def _stop_reading(self, stream_id: str) -> None:
        reader = self._readers.pop(stream_id, None)
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(self, stream_id: str, pubsub: PubSub, subscribed: asyncio.Future[None]) -> None:
        """Subscribe, say so through `subscribed`, then hand every message to the sink until cancelled."""
        async with pubsub:
            try:
                await pubsub.subscribe(channel(stream_id))
            except (RedisError, OSError) as exc:
                subscribed.set_exception(exc)
                return
            subscribed.set_result(None)
            try:
                async for message in pubsub.listen():
                    if message["type"] == "message":
                        self._sink.deliver(stream_id, message["data"])
            except (RedisError, OSError):
                log.warning("the Redis subscription of legacy SSE stream %s dropped; ending it", stream_id,
                            exc_info=True)
                self._sink.lost(stream_id)


def _claim_value(owner: StreamOwner) -> bytes:
    return orjson.dumps({"tenant_id": owner.tenant_id, "credential_kind": owner.credential_kind,
                         "credential_id": owner.credential_id})
