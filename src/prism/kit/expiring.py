"""A map whose entries are good for a while after they were fetched: the credential caches' bound.

An entry older than `max_age` seconds is of no use (the caller fetches it again before trusting it), so it is
dropped: what the map holds follows the credentials used in the last `max_age` seconds, not every credential
the process ever saw (a server runs for weeks while keys are minted, tokens granted and roles edited).

Entries sit in the order they were put (a refreshed entry moves to the end), so the expired ones are at the
front: each `put` drops them by looking at the front only, and a read is one dictionary lookup. `max_entries`
caps what a burst of distinct credentials within `max_age` can keep; the oldest go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ExpiringMap(Generic[K, V]):
    """At most `max_entries` entries, none older than `max_age` once another is put. `fetched_at(value)` is when
    the value was fetched, on the clock the caller compares it with (time.monotonic())."""

    def __init__(self, max_entries: int, max_age: float, fetched_at: Callable[[V], float]) -> None:
        if max_entries < 1:
            raise ValueError("an ExpiringMap keeps at least one entry")
        self.max_entries = max_entries
        self.max_age = max_age
        self._fetched_at = fetched_at
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        """Keep `value` as the newest entry and drop the expired ones and any beyond `max_entries`."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        now = self._fetched_at(value)
        while len(self._entries) > self.max_entries or self._expired_first(now):
            self._entries.popitem(last=False)

    def pop(self, key: K) -> None:
        self._entries.pop(key, None)

    def _expired_first(self, now: float) -> bool:
        oldest = next(iter(self._entries.values()), None)
        return oldest is not None and now - self._fetched_at(oldest) > self.max_age
