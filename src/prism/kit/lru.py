"""A small least-recently-used map: the per-caller caches' bound, so callers cannot grow memory without end.

Callers choose what to key by (anything a request can vary — a token's scopes, a Host header — is either kept
out of the key or bounded here). Reads and writes are single dictionary operations under the GIL; a read racing
an eviction from another thread is a miss, never an error.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `max_entries` entries and, when `weigh` is given, at most `max_weight` in total (the newest entry is
    kept even when it alone weighs more: the caller needs it now); the least recently used go first."""

    def __init__(self, max_entries: int, *, max_weight: int | None = None,
                 weigh: Callable[[V], int] | None = None) -> None:
        if max_entries < 1:
            raise ValueError("an LRU keeps at least one entry")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        try:
            value = self._entries[key]
            self._entries.move_to_end(key)
        except KeyError:  # absent, or evicted by another thread between the two steps
            return None
        return value

    def put(self, key: K, value: V) -> V:
        """Keep `value` as the most recent entry, evict beyond the bounds, and return it."""
        previous = self._entries.pop(key, None)
        if previous is not None:
            self._weight -= self._weight_of(previous)
        self._entries[key] = value
        self._weight += self._weight_of(value)
        self._evict()
        return value

    def values(self) -> list[V]:
        return list(self._entries.values())

    def _evict(self) -> None:
        while len(self._entries) > 1 and (len(self._entries) > self.max_entries or self._overweight()):
            try:
                _, evicted = self._entries.popitem(last=False)
            except KeyError:
                return
            self._weight -= self._weight_of(evicted)

    def _overweight(self) -> bool:
        return self.max_weight is not None and self._weight > self.max_weight

    def _weight_of(self, value: V) -> int:
        return self._weigh(value) if self._weigh is not None else 0
