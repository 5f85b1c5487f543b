"""The answer of one rate-limit check, shared by every storage."""

from __future__ import annotations

import math
from typing import NamedTuple


class Verdict(NamedTuple):
    """`reset_after`: seconds until the window restarts; `retry_after`: whole seconds to wait (0 if allowed).

    A named tuple rather than a frozen dataclass: one is made per request, and it builds in a third of the time.
    """

    allowed: bool
    limit: int
    remaining: int
    reset_after: float
    retry_after: int


_make_verdict = tuple.__new__


def verdict_of(count: int, limit: int, reset_after: float) -> Verdict:
    """The verdict for the `count`-th request of a window of `limit` (count includes this request)."""
    if reset_after < 0.0:
        reset_after = 0.0
    if count <= limit:  # every request that passes: the tuple made in C, without the named tuple's __new__
        return _make_verdict(Verdict, (True, limit, limit - count, reset_after, 0))
    return Verdict(False, limit, 0, reset_after, max(1, math.ceil(reset_after)))


class Locked(NamedTuple):
    """The address is blocked by the failed-authentication lockout for `seconds_left`; nothing was counted."""

    seconds_left: float


class Busy(NamedTuple):
    """The address's failures counted plus its attempts in flight fill the lockout's threshold, so a secret would
    have to wait for a place (prism.edge.lockout): nothing was counted."""


BUSY = Busy()
