"""The rate limiter: SPEC.md "Limits" tiers over one storage, and the failed-authentication lockout.

    verdict = await limiter.hit("authenticated", user_id, lock=address)   # Verdict, or Locked (nothing counted)
    reserved = await limiter.reserve_attempt(address, attempt)           # before a secret is checked
    outcome = await limiter.auth_failed(address, attempt)                 # Locked, or whether it locked now
    locked = await limiter.release_attempt(address, attempt)              # a right secret: Locked or None
    verdict = await limiter.hit_known_secret("mcp", tenant_id, address)  # Verdict, Locked, or Busy

Windows are fixed, opened by the first request of a key and `period` seconds long (60 s for every tier). The
lockout's failures are counted over a sliding window instead (the last `Lockout.window_seconds`, whenever they
fell): a block is a security promise ("ten within 60 seconds"), which a fixed window breaks at its edge.
A hit that names the address in `lock` checks the lockout and counts in the same step (one Redis round trip),
so a locked-out address is refused the same way whatever its credential was.

A secret is checked only once an attempt was reserved for it (`reserve_attempt`), and only while the failures
counted plus the attempts in flight are under the lockout's threshold: guesses sent all at once cannot have more
than that many secrets checked, the right one among them. Each attempt is settled by `auth_failed` (a wrong
secret: counted), `release_attempt` (a right one, or no guess) or a `hit` naming it, which releases it in the
same step as the count. A secret known right without a look at the storage (an API key in the authenticator's
cache) is counted by `hit_known_secret`: a reservation and its release at one instant, in the one step of its
count, Busy (nothing counted) when no place is free.

An IPv6 client is counted by its /64 (`address_key`): one host holds a whole /64 (SLAAC hands its addresses out,
privacy extensions rotate them), so per-address windows and a per-address lockout would let one machine make
nine guesses from each of 2^64 addresses. IPv4 addresses, and IPv4 mapped into IPv6, count as themselves.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from prism.config import Settings
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.unavailable import LimiterUnavailable, OnFailure
from prism.ratelimit.verdict import Busy, Locked, Verdict

TIERS = ("anonymous", "anonymous_discovery", "authenticated", "admin", "auth_endpoints", "mcp",
         "key_registration", "integration_changes")
WINDOW_SECONDS = 60.0
# The tiers counted per client address (the others per user, per tenant, or per organization: HANDLER_TIERS).
ADDRESS_TIERS = frozenset({"anonymous", "anonymous_discovery", "auth_endpoints", "key_registration"})
# The tiers counted per user share one window per user: the tier only chooses the ceiling a request is held to.
# A user who is an admin in one organization and a member in another makes at most the admin ceiling's requests
# a minute in all, and those in the member organization stop at the member ceiling, counting every request
# of the minute; a window per tier would give that user both ceilings, one after the other.
USER_TIERS = frozenset({"authenticated", "admin"})
USER_WINDOW = "user:"
# The tiers a handler may declare (`Handler.limit`): counted by the dispatcher, per organization, for each of its
# calls; the edge never counts them.
INTEGRATION_CHANGES = "integration_changes"
HANDLER_TIERS = frozenset({INTEGRATION_CHANGES})


def address_key(address: str) -> str:
    """What a client address is counted as: an IPv6 address as its /64 network, anything else as itself."""
    if ":" not in address:  # IPv4, or "unknown": no parsing on the common path
        return address
    return _ipv6_key(address)


# NAT64's well-known prefix (RFC 6052): every IPv4 client behind the translator shares its /64, so it is counted by
# the IPv4 address in the last 32 bits instead.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@lru_cache(maxsize=4096)
def _ipv6_key(address: str) -> str:
    try:
        ip = ipaddress.IPv6Address(address)
    except ValueError:
        return address
    # An IPv4 client seen through IPv6 is that IPv4 address: mapped, NAT64, 6to4 (a site's /48 is one IPv4
    # address), Teredo (the client's address, not its relay's).
    embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
    if embedded is None and ip in _NAT64:
        embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if embedded is not None:
        return str(embedded)
    return str(ipaddress.IPv6Network((int(ip), 64), strict=False))


class Backend(Protocol):
    """A storage of counters. Each method is atomic; each raises `LimiterUnavailable` when it cannot answer."""

    async def hit(self, key: str, limit: int, period: float, lock: str | None = None,
                  weight: int = 1, attempt: str | None = None) -> Verdict | Locked: ...

    async def hit_unless_busy(self, key: str, limit: int, period: float, lock: str,
                              threshold: int) -> Verdict | Locked | Busy: ...

    async def reserve(self, address: str, attempt: str, *, threshold: int) -> Locked | bool: ...

    async def release(self, address: str, attempt: str) -> Locked | None: ...

    async def fail(self, address: str, *, threshold: int, window_seconds: float,
                   block_seconds: float, attempt: str | None = None) -> Locked | bool: ...

    async def blocked_for(self, address: str) -> Locked | None: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Lockout:
    failures: int = 10
    window_seconds: float = 60.0
    block_seconds: float = 300.0


class RateLimiter:
    def __init__(self, ceilings: dict[str, int], backend: Backend, *, lockout: Lockout | None = None,
                 period: float = WINDOW_SECONDS, on_failure: OnFailure = "closed") -> None:
        unknown = set(ceilings) - set(TIERS)
        if unknown:
            raise ValueError(f"unknown rate-limit tiers {sorted(unknown)}; known: {', '.join(TIERS)}")
        self.ceilings = dict(ceilings)
        self.backend = backend
        self.lockout = lockout or Lockout()
        self.period = period
        self.fails_closed = on_failure == "closed"
        # "<tier>:" prefixes built once: the key of a hit is one string concatenation.
        self._prefixes = {tier: USER_WINDOW if tier in USER_TIERS else tier + ":" for tier in TIERS}

    # These hand back the storage's own awaitable instead of awaiting it in a coroutine of their own: they run
    # on every request, and a coroutine per call is most of their cost.

    def hit(self, tier: str, key: str, lock: str | None = None,
            attempt: str | None = None) -> Awaitable[Verdict | Locked]:
        """Count one request of `key` in `tier`, unless the address `lock` is locked out (then count nothing).
        `attempt`: the address's attempt this request reserved, settled in the same step (it was no failure)."""
        if tier in ADDRESS_TIERS:
            key = address_key(key)
        if lock is None:
            return self.backend.hit(self._prefixes[tier] + key, self.ceilings[tier], self.period)
        return self.backend.hit(self._prefixes[tier] + key, self.ceilings[tier], self.period, address_key(lock),
                                1, attempt)

    def hit_known_secret(self, tier: str, key: str, lock: str) -> Awaitable[Verdict | Locked | Busy]:
        """Count one request of `key` in `tier` whose secret is known to be right without reserving an attempt
        for it (an API key the authenticator's cache accepts): as a reservation and its release at one instant,
        in one step. Locked when `lock` is locked out; Busy (nothing counted) when the address's failures plus
        attempts in flight fill the lockout's threshold, so the secret must wait for a place like any other."""
        if tier in ADDRESS_TIERS:
            key = address_key(key)
        return self.backend.hit_unless_busy(self._prefixes[tier] + key, self.ceilings[tier], self.period,
                                            address_key(lock), self.lockout.failures)

    def hit_many(self, tier: str, key: str, count: int) -> Awaitable[Verdict | Locked]:
        """Count `count` more requests of `key` in `tier` at once: the requests of a JSON-RPC batch beyond the
        HTTP request that carried them, which the edge counted."""
        if tier in ADDRESS_TIERS:
            key = address_key(key)
        return self.backend.hit(self._prefixes[tier] + key, self.ceilings[tier], self.period, None, count)

    def locked_out(self, address: str) -> Awaitable[Locked | None]:
        """The address's lockout, or None."""
        return self.backend.blocked_for(address_key(address))

    def reserve_attempt(self, address: str, attempt: str) -> Awaitable[Locked | bool]:
        """Reserve the attempt `attempt` (a name unique to it) before checking a secret from `address`: True when
        reserved, False when the failures counted plus the attempts in flight already reach the threshold
        (nothing reserved: try again once some settle), Locked when the address is locked out."""
        return self.backend.reserve(address_key(address), attempt, threshold=self.lockout.failures)

    def release_attempt(self, address: str, attempt: str) -> Awaitable[Locked | None]:
        """Settle a reserved attempt that was no failure; the address's lockout as it is now, or None."""
        return self.backend.release(address_key(address), attempt)

    async def auth_failed(self, address: str, attempt: str | None = None) -> Locked | bool:
        """Record a failed authentication from `address` unless it is already locked out (then Locked);
        True when this failure locked it. `attempt`: the attempt reserved for it, settled in the same step.
        With the storage unreachable: False when failing open, else `LimiterUnavailable` (the caller's answer
        becomes a 503)."""
        lockout = self.lockout
        try:
            return await self.backend.fail(address_key(address), threshold=lockout.failures,
                                           window_seconds=lockout.window_seconds, block_seconds=lockout.block_seconds,
                                           attempt=attempt)
        except LimiterUnavailable:
            if self.fails_closed:
                raise
            return False

    async def ping(self) -> None:
        """Return when the storage answers; `LimiterUnavailable` when it does not (readiness probes)."""
        await self.backend.ping()

    async def close(self) -> None:
        await self.backend.close()


def ceilings_from(settings: Settings) -> dict[str, int]:
    return {tier: int(getattr(settings, f"rate_limit_{tier}")) for tier in TIERS}


def build_limiter(settings: Settings, *, clock: Callable[[], float] | None = None) -> RateLimiter:
    """Memory storage by default; Redis (shared by every process) when PRISM_REDIS_URL is set."""
    backend: Backend
    if settings.redis_url:
        from prism.ratelimit.redis_backend import RedisBackend  # only deployments with Redis import the client

        backend = RedisBackend(settings.redis_url)
    else:
        backend = MemoryBackend(clock) if clock is not None else MemoryBackend()
    lockout = Lockout(settings.lockout_failures, settings.lockout_window_seconds, settings.lockout_seconds)
    return RateLimiter(ceilings_from(settings), backend, lockout=lockout,
                       on_failure=settings.rate_limit_on_redis_failure)
