"""The legacy SSE relay over Redis: a claim key with a TTL per open stream, and pub/sub on a channel per stream.

    prism:mcp:sse:claim:<stream id>    {"tenant_id", "credential_kind", "credential_id"}, expires STREAM_TTL_SECONDS
                                       after the owner's last refresh
    prism:mcp:sse:<stream id>          the channel answers for the stream are published on

The channels of a process's open streams are subscribed on ONE connection of its own, read by one task
(prism.mcp_server.relay_redis_listener): each stream subscribes before it announces its endpoint and
unsubscribes when it closes, and should that connection drop or stop answering PINGs, every stream it served is
ended. Commands (claims, lookups, publishing) share one client with short timeouts.
"""

from __future__ import annotations

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from prism.mcp_server.relay import (
    DEFAULT_LIVENESS,
    STREAM_TTL_SECONDS,
    Liveness,
    RelayUnavailable,
    StreamOwner,
    StreamSink,
)
from prism.mcp_server.relay_redis_listener import PREFIX, RedisListener, channel
from prism.mcp_server.relay_shared import SharedRelay

__all__ = ["PREFIX", "RedisRelay", "channel", "claim_key"]


def claim_key(stream_id: str) -> str:
    return f"{PREFIX}claim:{stream_id}"


class RedisRelay(SharedRelay):
    store = "Redis"
    unreachable = (RedisError, OSError)

    def __init__(self, url: str, sink: StreamSink, liveness: Liveness = DEFAULT_LIVENESS) -> None:
        super().__init__(RedisListener(url, sink, liveness))
        # Commands wait at most this long for a Redis that went away: the POST then answers 503.
        self._commands = Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=5.0)

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
        await super().close()
        await self._commands.aclose()

    async def _extend(self, stream_ids: list[str]) -> list[str]:
        async with self._commands.pipeline(transaction=False) as pipe:
            for stream_id in stream_ids:
                pipe.expire(claim_key(stream_id), STREAM_TTL_SECONDS)
            extended = await pipe.execute()
        return [stream_id for stream_id, done in zip(stream_ids, extended, strict=True) if not done]

    async def _record(self, owners: dict[str, StreamOwner]) -> None:
        async with self._commands.pipeline(transaction=False) as pipe:
            for stream_id, owner in owners.items():
                pipe.set(claim_key(stream_id), _claim_value(owner), ex=STREAM_TTL_SECONDS)
            await pipe.execute()

    async def _drop(self, stream_id: str) -> None:
        await self._commands.delete(claim_key(stream_id))


def _claim_value(owner: StreamOwner) -> bytes:
    return orjson.dumps({"tenant_id": owner.tenant_id, "credential_kind": owner.credential_kind,
                         "credential_id": owner.credential_id})
