"""The failed-authentication lockout as the pages that check a secret themselves obey it: the login form, key
registration, and the OAuth token, revocation and registration-management endpoints.

The edge refuses a locked-out address before such a page runs, but guesses sent together all pass the edge before
any of them has been counted: forty wrong passwords at once would all be checked and answered 401. So the page
obeys the lockout again once it has checked the secret, in one atomic step of the limiter each way:

- a wrong secret is counted with `auth_failed`, which counts nothing and answers `Locked` when the address is
  already locked: that guess is refused 429 like every guess after the tenth, so exactly ten are answered as
  failures;
- a right secret is honoured only if the address is not locked at that moment: a right password checked alongside
  the guesses that locked the address is refused 429 like them, so no answer after the tenth failure tells a
  right guess from a wrong one.

Only a secret that was presented and wrong counts: a request that sent none is no guess.
"""

from __future__ import annotations

import math

from starlette.types import Scope

from prism.edge.context import request_context
from prism.errors import RateLimited
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked


class LockedOut(RateLimited):
    code = "too_many_failed_attempts"


def locked_out(address: str, seconds_left: float) -> LockedOut:
    seconds = max(1, math.ceil(seconds_left))
    error = LockedOut(f"too many failed authentication attempts from {address}; retry in {seconds} s")
    error.headers = {"Retry-After": str(seconds)}
    return error


async def count_failure(scope: Scope) -> None:
    """Count a wrong secret against the request's address; `LockedOut` when the address was already locked out
    (nothing counted: the page answers 429, not its failure). `LimiterUnavailable` as `RateLimiter.auth_failed`."""
    context = request_context(scope)
    context.authentication_failed = True
    outcome = await scope["app"].state.rate_limiter.auth_failed(context.address)
    if isinstance(outcome, Locked):
        _refuse(scope, outcome.seconds_left)


async def refuse_if_locked_out(scope: Scope) -> None:
    """`LockedOut` when the request's address is locked out now: a right secret is then refused like a wrong one.
    With the limiter's storage unreachable: `LimiterUnavailable` when failing closed, else nothing."""
    limiter = scope["app"].state.rate_limiter
    try:
        locked = await limiter.locked_out(request_context(scope).address)
    except LimiterUnavailable:
        if limiter.fails_closed:  # as for a wrong secret: no answer about a secret without the counters
            raise
        return
    if locked is not None:
        _refuse(scope, locked.seconds_left)


def _refuse(scope: Scope, seconds_left: float) -> None:
    context = request_context(scope)
    refusal = context.refusal = locked_out(context.address, seconds_left)  # logged and counted as a lockout
    raise refusal
