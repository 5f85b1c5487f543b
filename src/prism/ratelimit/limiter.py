"""The rate limiter: SPEC.md "Limits" tiers over one storage, and the failed-authentication lockout.

    verdict = await limiter.hit("authenticated", user_id)
    await limiter.auth_failed(address); seconds_left = await limiter.locked_out(address)

Windows are fixed, opened by the first request of a key and `period` seconds long (60 s for every tier).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from prism.config import Settings
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.verdict import Verdict

TIERS = ("anonymous", "authenticated", "admin", "auth_endpoints", "mcp", "key_registration")
WINDOW_SECONDS = 60.0


class Backend(Protocol):
    async def hit(self, key: str, limit: int, period: float) -> Verdict: ...

    async def fail(self, address: str, *, threshold: int, window_seconds: float, block_seconds: float) -> bool: ...

    async def blocked_for(self, address: str) -> float | None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Lockout:
    failures: int = 10
    window_seconds: float = 60.0
    block_seconds: float = 300.0


class RateLimiter:
    def __init__(self, ceilings: dict[str, int], backend: Backend, *, lockout: Lockout | None = None,
                 period: float = WINDOW_SECONDS) -> None:
        unknown = set(ceilings) - set(TIERS)
        if unknown:
            raise ValueError(f"unknown rate-limit tiers {sorted(unknown)}; known: {', '.join(TIERS)}")
        self.ceilings = dict(ceilings)
        self.backend = backend
        self.lockout = lockout or Lockout()
        self.period = period
        # "<tier>:" prefixes built once: the key of a hit is one string concatenation.
        self._prefixes = {tier: tier + ":" for tier in TIERS}

    # These hand back the storage's own awaitable instead of awaiting it in a coroutine of their own: the
    # first two run on every credentialed request, and a coroutine per call is most of their cost.

    def hit(self, tier: str, key: str) -> Awaitable[Verdict]:
        """Count one request of `key` in `tier` and say whether it may proceed."""
        return self.backend.hit(self._prefixes[tier] + key, self.ceilings[tier], self.period)

    def locked_out(self, address: str) -> Awaitable[float | None]:
        """Seconds the address stays blocked, or None."""
        return self.backend.blocked_for(address)

    def auth_failed(self, address: str) -> Awaitable[bool]:
        """Record a failed authentication from `address`; True when this failure locked the address out."""
        lockout = self.lockout
        return self.backend.fail(address, threshold=lockout.failures, window_seconds=lockout.window_seconds,
                                 block_seconds=lockout.block_seconds)

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
    return RateLimiter(ceilings_from(settings), backend, lockout=lockout)
