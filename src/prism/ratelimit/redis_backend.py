"""Counters in Redis, shared by every Prism process of a deployment (PRISM_REDIS_URL).

Each check is ONE round trip: a Lua script increments the window counter, starts its expiry on the
first hit and returns the count with the time left. The `limits` package needs two round trips for
the same answer (hit, then window statistics for the headers): ~500 µs against ~150 µs measured on
a local Redis. Scripts run atomically, so concurrent requests from many processes never overshoot.

When Redis cannot be reached the limiter fails open (requests pass, nothing is locked) and logs it:
an outage of the counters must not become an outage of every door.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from prism.ratelimit.verdict import Verdict, verdict_of

_HIT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}
"""

_FAIL = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if n >= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

PREFIX = "prism:rl:"
log = logging.getLogger("prism.ratelimit")
# One log line per this many seconds while Redis is unreachable, not one per request.
COMPLAINT_INTERVAL = 30.0


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class RedisBackend:
    def __init__(self, url: str) -> None:
        # Short timeouts: a check waits at most this long for a Redis that went away, then fails open.
        self.redis: Redis = Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0)
        self._hit: Any = self.redis.register_script(_HIT)
        self._fail: Any = self.redis.register_script(_FAIL)
        self._complained = -COMPLAINT_INTERVAL

    async def hit(self, key: str, limit: int, period: float) -> Verdict:
        try:
            count, ttl_ms = await self._hit(keys=[PREFIX + key], args=[_ms(period)])
        except RedisError as exc:
            self._complain(exc)
            return Verdict(True, limit, limit, period, 0)
        return verdict_of(int(count), limit, int(ttl_ms) / 1000)

    async def fail(self, address: str, *, threshold: int, window_seconds: float, block_seconds: float) -> bool:
        # One hash tag per address keeps both keys in one slot on a Redis Cluster.
        base = f"{PREFIX}auth:{{{address}}}"
        try:
            locked = await self._fail(keys=[base + ":failures", base + ":lock"],
                                      args=[_ms(window_seconds), threshold, _ms(block_seconds)])
        except RedisError as exc:
            self._complain(exc)
            return False
        return bool(locked)

    async def blocked_for(self, address: str) -> float | None:
        try:
            ttl_ms = int(await self.redis.pttl(f"{PREFIX}auth:{{{address}}}:lock"))
        except RedisError as exc:
            self._complain(exc)
            return None
        return ttl_ms / 1000 if ttl_ms > 0 else None

    def _complain(self, exc: RedisError) -> None:
        now = time.monotonic()
        if now - self._complained >= COMPLAINT_INTERVAL:
            self._complained = now
            log.error("rate limits and lockout are not enforced: Redis is unreachable (%s)", exc)

    async def close(self) -> None:
        await self.redis.aclose()
