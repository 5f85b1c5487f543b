"""In-process counters: fixed windows in a dict, for one Prism process (the default storage).

The lockout's failures are a sliding window instead: the times the address's recent failures stop counting, so
"ten failures within 60 s" holds for any 60 s, not only within a window the first failure opened (where ten
failures straddling its end, nine just before and nine just after, would never be seen together).

A check is a dict lookup and an integer compare (~1 µs); the `limits` package's memory storage needs
~10 µs for a hit plus the window statistics the headers need, on the hot path of every dispatch.
Every method runs to completion without awaiting anything, so each is atomic within the process, like
the Redis scripts are across processes.
The clock is injectable so tests can move time instead of sleeping through a 300 s lockout.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from prism.ratelimit.verdict import BUSY, Busy, Locked, Verdict, verdict_of

# Expired windows and failures are swept whenever this many new ones have been opened, so idle keys cannot pile up.
SWEEP_EVERY = 4096


class MemoryBackend:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._windows: dict[str, list[float]] = {}  # key -> [window end, count]
        # address -> when each of its recent failures stops counting, oldest first: the count is the deque's length
        # once the ended ones are dropped. At most the threshold's number are kept (the threshold-th locks).
        self._failures: dict[str, deque[float]] = {}
        self._locks: dict[str, float] = {}  # address -> blocked until
        # address -> the attempts reserved and not yet settled: each ends in `fail`, `release` or a `hit` naming it
        self._pending: dict[str, set[str]] = {}
        self._opened = 0

    async def hit(self, key: str, limit: int, period: float, lock: str | None = None,
                  weight: int = 1, attempt: str | None = None) -> Verdict | Locked:
        now = self.clock()
        if attempt is not None and lock is not None:
            self._settle(lock, attempt)
        if lock is not None and self._locks:
            locked = self._lock_left(lock, now)
            if locked is not None:
                return locked
        return self._count(key, limit, period, weight, now)

    async def hit_unless_busy(self, key: str, limit: int, period: float, lock: str,
                              threshold: int) -> Verdict | Locked | Busy:
        now = self.clock()
        locked = self._lock_left(lock, now)
        if locked is not None:
            return locked
        if self._places_taken(lock, now) >= threshold:
            return BUSY
        return self._count(key, limit, period, 1, now)

    def _count(self, key: str, limit: int, period: float, weight: int, now: float) -> Verdict:
        window = self._windows.get(key)
        if window is None or now >= window[0]:
            window = self._open(self._windows, key, now + period)
        window[1] += weight
        return verdict_of(int(window[1]), limit, window[0] - now)

    async def reserve(self, address: str, attempt: str, *, threshold: int) -> Locked | bool:
        now = self.clock()
        locked = self._lock_left(address, now)
        if locked is not None:
            return locked
        if self._places_taken(address, now) >= threshold:
            return False
        self._pending.setdefault(address, set()).add(attempt)
        return True

    async def release(self, address: str, attempt: str) -> Locked | None:
        self._settle(address, attempt)
        return self._lock_left(address, self.clock())

    async def fail(self, address: str, *, threshold: int, window_seconds: float,
                   block_seconds: float, attempt: str | None = None) -> Locked | bool:
        now = self.clock()
        if attempt is not None:
            self._settle(address, attempt)
        locked = self._lock_left(address, now)
        if locked is not None:
            return locked
        failures = self._failures.get(address)
        if failures is None:
            self._opened_one()  # before the deque is made: a sweep drops empty ones
            failures = self._failures[address] = deque(maxlen=threshold)
        _drop_ended(failures, now)
        failures.append(now + window_seconds)
        if len(failures) < threshold:
            return False
        del self._failures[address]  # the count starts afresh after a block
        self._locks[address] = now + block_seconds
        return True

    async def blocked_for(self, address: str) -> Locked | None:
        return self._lock_left(address, self.clock())

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def _places_taken(self, address: str, now: float) -> int:
        """The address's failures counted plus its attempts in flight: each holds one of the threshold's places."""
        recent = self._failures.get(address)
        failures = _drop_ended(recent, now) if recent else 0
        pending = self._pending.get(address)
        return failures + (len(pending) if pending else 0)

    def _settle(self, address: str, attempt: str) -> None:
        pending = self._pending.get(address)
        if pending is not None:
            pending.discard(attempt)
            if not pending:
                del self._pending[address]

    def _lock_left(self, address: str, now: float) -> Locked | None:
        until = self._locks.get(address)
        if until is None:
            return None
        if now >= until:
            del self._locks[address]
            return None
        return Locked(until - now)

    def _open(self, table: dict[str, list[float]], key: str, ends: float) -> list[float]:
        self._opened_one()
        window = table[key] = [ends, 0]
        return window

    def _opened_one(self) -> None:
        self._opened += 1
        if self._opened % SWEEP_EVERY == 0:
            self._sweep()

    def _sweep(self) -> None:
        now = self.clock()
        for key in [k for k, w in self._windows.items() if now >= w[0]]:
            del self._windows[key]
        for key in [k for k, ends in self._failures.items() if not ends or now >= ends[-1]]:
            del self._failures[key]
        for key in [k for k, until in self._locks.items() if now >= until]:
            del self._locks[key]


def _drop_ended(failures: deque[float], now: float) -> int:
    """Drop the failures that stopped counting (they end in the order they were made); how many still count."""
    while failures and now >= failures[0]:
        failures.popleft()
    return len(failures)
