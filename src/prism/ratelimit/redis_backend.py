"""Counters in Redis, shared by every Prism process of a deployment (PRISM_REDIS_URL).

Each check is ONE round trip: a Lua script looks at the address's lockout key, and unless it is set
increments the window counter, starts its expiry on the first hit and returns the count with the time
left. The `limits` package needs two round trips for the count alone (hit, then window statistics for
the headers), and a separate lockout lookup would be a third. Scripts run atomically, so concurrent
requests from many processes never overshoot a ceiling and never exceed the lockout's threshold.

When Redis cannot be reached every method raises `LimiterUnavailable`; what happens then is the edge's
decision (prism.ratelimit.unavailable). A WARNING is logged once per interval, not once per request.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked, Verdict, verdict_of

# KEYS[1]: the window counter; KEYS[2] (optional): the address's lockout key. {-1, ms left} when locked.
_HIT = """
if KEYS[2] then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then return {-1, left} end
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}
"""

# KEYS[1]: the failure counter, KEYS[2]: the lockout key. {-1, ms left} when already locked (nothing counted),
# {1, 0} when this failure locked the address, {0, 0} otherwise.
_FAIL = """
local left = redis.call('PTTL', KEYS[2])
if left > 0 then return {-1, left} end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if n >= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
return {0, 0}
"""

PREFIX = "prism:rl:"
log = logging.getLogger("prism.ratelimit")
# One log line per this many seconds while Redis is unreachable, not one per request.
COMPLAINT_INTERVAL = 30.0


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _auth_key(address: str) -> str:
    # One hash tag per address keeps its failure counter and lockout key in one slot on a Redis Cluster.
    return f"{PREFIX}auth:{{{address}}}"


class RedisBackend:
    def __init__(self, url: str, *, client_name: str | None = None) -> None:
        # Short timeouts: a check waits at most this long for a Redis that went away.
        self.redis: Redis = Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0,
                                           client_name=client_name)
        self._hit: Any = self.redis.register_script(_HIT)
        self._fail: Any = self.redis.register_script(_FAIL)
        self._complained = -COMPLAINT_INTERVAL

    async def hit(self, key: str, limit: int, period: float, lock: str | None = None) -> Verdict | Locked:
        keys = [PREFIX + key] if lock is None else [PREFIX + key, _auth_key(lock) + ":lock"]
        try:
            count, ttl_ms = await self._hit(keys=keys, args=[_ms(period)])
        except RedisError as exc:
            raise self._unavailable(exc) from None
        if count < 0:
            return Locked(int(ttl_ms) / 1000)
        return verdict_of(int(count), limit, int(ttl_ms) / 1000)

    async def fail(self, address: str, *, threshold: int, window_seconds: float,
                   block_seconds: float) -> Locked | bool:
        base = _auth_key(address)
        try:
            state, ttl_ms = await self._fail(keys=[base + ":failures", base + ":lock"],
                                             args=[_ms(window_seconds), threshold, _ms(block_seconds)])
        except RedisError as exc:
            raise self._unavailable(exc) from None
        if state < 0:
            return Locked(int(ttl_ms) / 1000)
        return bool(state)

    async def blocked_for(self, address: str) -> Locked | None:
        try:
            ttl_ms = int(await self.redis.pttl(_auth_key(address) + ":lock"))
        except RedisError as exc:
            raise self._unavailable(exc) from None
        return Locked(ttl_ms / 1000) if ttl_ms > 0 else None

    async def ping(self) -> None:
        try:
            await self.redis.ping()
        except RedisError as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: RedisError) -> LimiterUnavailable:
        now = time.monotonic()
        if now - self._complained >= COMPLAINT_INTERVAL:
            self._complained = now
            # The exception's class and text name the host and port at most, never the URL's password.
            log.warning("rate limits and the lockout cannot be checked: Redis is unreachable (%s: %s)",
                        type(exc).__name__, exc)
        return LimiterUnavailable()

    async def close(self) -> None:
        await self.redis.aclose()
