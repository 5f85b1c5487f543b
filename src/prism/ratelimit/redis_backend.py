"""Counters in Redis, shared by every Prism process of a deployment (PRISM_REDIS_URL).

Each check is ONE script call: a Lua script looks at the address's lockout key, and unless it is set
increments the window counter, starts its expiry on the first hit and returns the count with the time
left. The `limits` package needs two round trips for the count alone (hit, then window statistics for
the headers), and a separate lockout lookup would be a third. A request whose API key the authenticator's cache
accepts checks the attempts in flight in that same call too (`hit_unless_busy`); other credentials reserve an
attempt first, one script call more (prism.edge.lockout). Scripts run atomically, so concurrent
requests from many processes never overshoot a ceiling and never exceed the lockout's threshold.

The checks of a process's requests in flight share round trips: while one pipeline of script calls is on its
way, the checks that arrive wait for the next, which carries all of them (every script: a window's hit, and an
attempt's reservation, failure or release for the lockout). A lone request still costs one round
trip; under load one round trip serves many. redis-py spends about 50-90 µs of CPU per command sent alone and
about 12 µs per command in a pipeline of 32 (bench/README.md).

When Redis cannot be reached every method raises `LimiterUnavailable`; what happens then is the edge's
decision (prism.ratelimit.unavailable). A WARNING is logged once per interval, not once per request.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError

from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import BUSY, Busy, Locked, Verdict, verdict_of

# The address's recent failures are a sorted set: one member per failure, scored by when it stops counting (its
# time plus the lockout's window, Redis's own clock), so the count is a sliding window over the last
# `window_seconds`: ten failures within any 60 s lock, however they straddle a minute. A fixed window opened by
# the first failure let nine just before its end and nine just after pass unseen together. Every script reading
# the count drops the ended members first (ZREMRANGEBYSCORE) and counts the rest (ZCARD).

# KEYS[1]: the window counter; KEYS[2] (optional): the address's lockout key; KEYS[3] (optional): the address's
# attempts in flight, ARGV[3] the attempt this request reserved ('' for none; settled here: its credential was
# accepted or is no guess); KEYS[4] (optional): the address's recent failures, ARGV[4] the lockout's threshold:
# a request whose secret is known right without a reservation (prism.edge.stack) is counted only while the failures
# plus the attempts in flight are under it, as _RESERVE reserves, {-2, 0} otherwise (nothing counted). ARGV: the
# window (ms), how many requests to count. {-1, ms left} when locked.
_HIT = """
if KEYS[3] and ARGV[3] ~= '' then redis.call('ZREM', KEYS[3], ARGV[3]) end
if KEYS[2] then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then return {-1, left} end
end
if KEYS[4] then
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  if redis.call('ZCARD', KEYS[4]) + redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return {-2, 0} end
end
local weight = tonumber(ARGV[2])
local n = redis.call('INCRBY', KEYS[1], weight)
if n == weight then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}
"""

# KEYS[1]: the recent failures, KEYS[2]: the lockout key, KEYS[3]: the attempts in flight; ARGV: the lockout's
# window (ms), threshold and block (ms), the attempt this failure settles ('' for none), and this failure's member
# (unique). {-1, ms left} when already locked (nothing counted), {1, 0} when this failure locked the address (the
# count starts afresh after the block), {0, 0} otherwise. The set holds fewer members than the threshold (the
# threshold-th locks and empties it) and expires with its newest failure.
_FAIL = """
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[3], ARGV[4]) end
local left = redis.call('PTTL', KEYS[2])
if left > 0 then return {-1, left} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[5])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {0, 0}
"""

# KEYS as _FAIL's; ARGV[1]: the failure threshold, ARGV[2]: the attempt, ARGV[3]: its lease (ms). An attempt is
# reserved before its secret is checked, while the failures counted plus the attempts in flight are under the
# threshold: {1, 0}; {0, 0} when they are not (nothing reserved); {-1, ms left} when locked. Each attempt in flight
# is a member scored by the end of its lease, Redis's own clock: one whose process died before settling it stops
# holding a place when its lease ends.
_RESERVE = """
local left = redis.call('PTTL', KEYS[2])
if left > 0 then return {-1, left} end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[1]) then return {0, 0} end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {1, 0}
"""

# KEYS[1]: the attempts in flight, KEYS[2]: the lockout key; ARGV[1]: the attempt. The lock's ms left (0: none).
_RELEASE = """
redis.call('ZREM', KEYS[1], ARGV[1])
local left = redis.call('PTTL', KEYS[2])
if left > 0 then return left end
return 0
"""

PREFIX = "prism:rl:"
# Longer than any check of a secret takes: an attempt not settled by then was lost with its process.
ATTEMPT_LEASE_SECONDS = 60.0
log = logging.getLogger("prism.ratelimit")
# One log line per this many seconds while Redis is unreachable, not one per request.
COMPLAINT_INTERVAL = 30.0


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _auth_key(address: str) -> str:
    # One hash tag per address keeps its failures and lockout key in one slot on a Redis Cluster.
    return f"{PREFIX}auth:{{{address}}}"


# The sorted set of recent failures. Not `:failures`, the fixed window's counter (a string) before: a process of
# the previous version still running beside this one during an upgrade would answer WRONGTYPE on each other's key.
FAILURES = ":recent-failures"


class RedisBackend:
    def __init__(self, url: str, *, client_name: str | None = None) -> None:
        # Short timeouts: a check waits at most this long for a Redis that went away.
        self.redis: Redis = Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=1.0,
                                           client_name=client_name)
        self._scripts = {name: _Script(source, self.redis.register_script(source).sha)
                         for name, source in (("hit", _HIT), ("fail", _FAIL), ("reserve", _RESERVE),
                                              ("release", _RELEASE))}
        self._complained = -COMPLAINT_INTERVAL
        self._waiting: list[_Check] = []  # hits for the next pipeline
        self._sender: asyncio.Task[None] | None = None

    async def hit(self, key: str, limit: int, period: float, lock: str | None = None,
                  weight: int = 1, attempt: str | None = None) -> Verdict | Locked:
        if lock is None:
            keys: tuple[str, ...] = (PREFIX + key,)
        elif attempt is None:
            keys = (PREFIX + key, _auth_key(lock) + ":lock")
        else:
            keys = (PREFIX + key, _auth_key(lock) + ":lock", _auth_key(lock) + ":pending")
        args = (_ms(period), weight) if attempt is None else (_ms(period), weight, attempt)
        count, ttl_ms = await self._run("hit", keys, args)
        if count < 0:
            return Locked(int(ttl_ms) / 1000)
        return verdict_of(int(count), limit, int(ttl_ms) / 1000)

    async def hit_unless_busy(self, key: str, limit: int, period: float, lock: str,
                              threshold: int) -> Verdict | Locked | Busy:
        base = _auth_key(lock)
        count, ttl_ms = await self._run("hit", (PREFIX + key, base + ":lock", base + ":pending", base + FAILURES),
                                        (_ms(period), 1, "", threshold))
        if count == -2:
            return BUSY
        if count < 0:
            return Locked(int(ttl_ms) / 1000)
        return verdict_of(int(count), limit, int(ttl_ms) / 1000)

    async def reserve(self, address: str, attempt: str, *, threshold: int) -> Locked | bool:
        base = _auth_key(address)
        state, ttl_ms = await self._run("reserve", (base + FAILURES, base + ":lock", base + ":pending"),
                                        (threshold, attempt, _ms(ATTEMPT_LEASE_SECONDS)))
        if state < 0:
            return Locked(int(ttl_ms) / 1000)
        return bool(state)

    async def release(self, address: str, attempt: str) -> Locked | None:
        base = _auth_key(address)
        ttl_ms = int(await self._run("release", (base + ":pending", base + ":lock"), (attempt,)))
        return Locked(ttl_ms / 1000) if ttl_ms > 0 else None

    async def fail(self, address: str, *, threshold: int, window_seconds: float,
                   block_seconds: float, attempt: str | None = None) -> Locked | bool:
        base = _auth_key(address)
        state, ttl_ms = await self._run("fail", (base + FAILURES, base + ":lock", base + ":pending"),
                                        (_ms(window_seconds), threshold, _ms(block_seconds), attempt or "",
                                         secrets.token_hex(8)))
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

    async def _run(self, script: str, keys: tuple[str, ...], args: tuple[str | int, ...]) -> Any:
        """The reply of one script call, sent with the next pipeline; `LimiterUnavailable` when Redis is not."""
        check = _Check(self._scripts[script], keys, args, asyncio.get_running_loop().create_future())
        self._waiting.append(check)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_waiting())
        try:
            return await check.reply
        except RedisError as exc:
            raise self._unavailable(exc) from None

    async def _send_waiting(self) -> None:
        """One pipeline at a time, each with every hit waiting when it leaves, until none are left."""
        while self._waiting:
            checks, self._waiting = self._waiting, []
            try:
                replies = await self._evaluate(checks)
                for check, reply in zip(checks, replies, strict=True):
                    if not check.reply.done():  # its request may have been cancelled meanwhile
                        if isinstance(reply, Exception):
                            check.reply.set_exception(reply)
                        else:
                            check.reply.set_result(reply)
            except RedisError as exc:  # the connection: every hit of the pipeline fails alike
                _fail_all(checks, exc)
            finally:  # cancelled (the process stops) or a fault: no request waits forever
                _fail_all(checks, RedisConnectionError("the rate-limit pipeline stopped"))

    async def _evaluate(self, checks: list[_Check]) -> list[Any]:
        replies = await self._pipeline(checks)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:  # Redis restarted or flushed its scripts: load them, and run again only what did not run
            for source in {checks[i].script.source for i in missing}:
                await self.redis.script_load(source)
            for i, reply in zip(missing, await self._pipeline([checks[i] for i in missing]), strict=True):
                replies[i] = reply
        return replies

    async def _pipeline(self, checks: list[_Check]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for check in checks:
            pipe.evalsha(check.script.sha, len(check.keys), *check.keys, *check.args)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    async def close(self) -> None:
        if self._sender is not None:
            self._sender.cancel()
        await self.redis.aclose()


class _Script(NamedTuple):
    source: str
    sha: str


class _Check:
    __slots__ = ("args", "keys", "reply", "script")

    def __init__(self, script: _Script, keys: tuple[str, ...], args: tuple[str | int, ...],
                 reply: asyncio.Future[Any]) -> None:
        self.script = script
        self.keys = keys
        self.args = args
        self.reply = reply


def _fail_all(checks: list[_Check], exc: RedisError) -> None:
    for check in checks:
        if not check.reply.done():
            check.reply.set_exception(exc)
