"""The failed-authentication lockout as every check of a secret obeys it: the edge's Bearer credential, and the
pages that check one themselves (the login form, key registration, the OAuth token, revocation and
registration-management endpoints; userinfo checks an access token, which reserves nothing: `settle_unreserved`).

Each check is counted before it runs: `reserve_attempt` reserves an attempt for it in the limiter, atomically,
and only while the failures counted plus the attempts in flight are under the threshold. Guesses sent together
would otherwise all pass the edge and all be checked before any was counted: forty passwords at once, and a right
one whose check ended before the tenth failure was counted signed in, though it was the thirtieth guess. Now at
most ten secrets of an address are ever being checked or counted as failed; the others wait for their turn
(`SLOT_WAIT_SECONDS` at most, then 429 `too_many_attempts_in_progress`) and, once ten failed, are refused 429
`too_many_failed_attempts` without being checked. Then the attempt is settled, in one atomic step each way:

- a wrong secret is counted (`SecretAttempt.failed`); it answers `Locked` when the address is already locked:
  that guess is refused 429 like every guess after the tenth, so exactly ten are answered as failures;
- a right secret (`SecretAttempt.succeeded`) frees its place, as it is no failure, and is honoured only if the
  address is not locked at that moment: no answer after the tenth failure tells a right guess from a wrong one.

Only a secret that was presented counts: a request that sent none reserves nothing, and an OAuth access token
(a signature: no guess produces one) is counted after its check without a place (`settle_unreserved`). An API key the
authenticator's cache accepts is counted by the edge without a reservation, in one step that checks what a
reservation would (prism.edge.stack); when no place is free it is reserved here like any other secret.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.types import Scope

from prism.edge.context import RequestContext, request_context
from prism.errors import RateLimited
from prism.ratelimit.limiter import RateLimiter
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked

# How long a secret waits for a place among the attempts in flight before it is refused: the ten before it are
# checked within milliseconds (a key) or a few hundred (a password).
SLOT_WAIT_SECONDS = 5.0
# The waits between tries for a place: short at first (a key's check ends within a round trip), then longer.
FIRST_RETRY_SECONDS, LAST_RETRY_SECONDS = 0.002, 0.05


class LockedOut(RateLimited):
    code = "too_many_failed_attempts"


class AttemptsInProgress(LockedOut):  # refused for the lockout's sake, and answered with its headers
    code = "too_many_attempts_in_progress"


def locked_out(address: str, locked: Locked) -> LockedOut:
    """The 429 of a locked-out address, wherever the lockout is met (the edge, a page checking a secret)."""
    seconds = max(1, math.ceil(locked.seconds_left))
    error = LockedOut(f"too many failed authentication attempts from {address}; retry in {seconds} s")
    error.headers = {"Retry-After": str(seconds)}
    return error


def attempts_in_progress(address: str) -> AttemptsInProgress:
    error = AttemptsInProgress(f"too many authentication attempts from {address} are being checked; retry in 1 s")
    error.headers = {"Retry-After": "1"}
    return error


class SecretAttempt:
    """One reserved check of a secret from `address`; settle it once with `failed` or `succeeded` (`abandon` frees
    it when neither was reached). With the limiter failing open it reserved nothing (`name` is None) and its
    settling counts what it can."""

    def __init__(self, limiter: RateLimiter, address: str, name: str | None) -> None:
        self.limiter = limiter
        self.address = address
        self.name = name
        self.settled = False
        # The request's context, when a page checks the secret: a wrong one is a security event whatever status
        # the page answers (400 for an OAuth client's secret sent in the form).
        self.context: RequestContext | None = None

    async def failed(self) -> None:
        """Count the wrong secret; `LockedOut` when the address was already locked (the answer is 429, not the
        failure). `LimiterUnavailable` as `RateLimiter.auth_failed`."""
        self.settled = True
        if self.context is not None:
            self.context.authentication_failed = True
        outcome = await self.limiter.auth_failed(self.address, self.name)
        if isinstance(outcome, Locked):
            raise locked_out(self.address, outcome)

    async def succeeded(self) -> None:
        """Free the place of a right secret; `LockedOut` when the address is locked now (the right secret is
        refused like a wrong one). With the storage unreachable: `LimiterUnavailable` when failing closed."""
        self.settled = True
        try:
            if self.name is None:
                locked = await self.limiter.locked_out(self.address)
            else:
                locked = await self.limiter.release_attempt(self.address, self.name)
        except LimiterUnavailable:
            if self.limiter.fails_closed:  # as for a wrong secret: no answer about a secret without the counters
                raise
            return
        if locked is not None:
            raise locked_out(self.address, locked)

    async def abandon(self) -> None:
        """Free the place of an attempt neither failed nor succeeded (its check raised, or it was no guess)."""
        if self.settled or self.name is None:
            return
        self.settled = True
        try:
            await self.limiter.release_attempt(self.address, self.name)
        except LimiterUnavailable:
            pass  # Redis ends the attempt's lease on its own (prism.ratelimit.redis_backend)


async def reserve_attempt(limiter: RateLimiter, address: str) -> SecretAttempt:
    """An attempt reserved for checking one secret from `address`, waiting for a place while the attempts in
    flight fill the lockout's threshold. `LockedOut` when the address is locked out; `AttemptsInProgress` when no
    place came free in time. With the storage unreachable: `LimiterUnavailable` when failing closed, else an
    attempt that reserved nothing."""
    name = secrets.token_hex(8)
    deadline = time.monotonic() + SLOT_WAIT_SECONDS
    pause = FIRST_RETRY_SECONDS
    while True:
        try:
            outcome = await limiter.reserve_attempt(address, name)
        except LimiterUnavailable:
            if limiter.fails_closed:
                raise
            return SecretAttempt(limiter, address, None)
        if isinstance(outcome, Locked):
            raise locked_out(address, outcome)
        if outcome:
            return SecretAttempt(limiter, address, name)
        if time.monotonic() + pause > deadline:
            raise attempts_in_progress(address)
        await asyncio.sleep(pause)
        pause = min(pause * 2, LAST_RETRY_SECONDS)


async def settle_unreserved(scope: Scope, *, failed: bool) -> None:
    """Settle a page's check of a secret that reserved no place: an OAuth access token, a signature over its claims
    that no guess produces however many are checked at once (as at the edge). A wrong one is counted as a
    failure; a locked-out address is refused either way (`LockedOut`, left in the request's context too)."""
    context = request_context(scope)
    limiter: RateLimiter = scope["app"].state.rate_limiter
    if failed:
        context.authentication_failed = True
        outcome = await limiter.auth_failed(context.address)
        locked = outcome if isinstance(outcome, Locked) else None
    else:
        try:
            locked = await limiter.locked_out(context.address)
        except LimiterUnavailable:
            if limiter.fails_closed:  # as `SecretAttempt.succeeded`: no answer about a secret without the counters
                raise
            return
    if locked is not None:
        context.refusal = locked_out(context.address, locked)
        raise context.refusal


@asynccontextmanager
async def secret_attempt(scope: Scope) -> AsyncIterator[SecretAttempt]:
    """A page's check of one secret, reserved first (`reserve_attempt`) and freed on the way out unless settled.
    A lockout refusal is left in the request's context too: logged and counted as the edge's are."""
    context = request_context(scope)
    try:
        attempt = await reserve_attempt(scope["app"].state.rate_limiter, context.address)
        attempt.context = context
        try:
            yield attempt
        finally:
            await attempt.abandon()
    except LockedOut as refusal:
        context.refusal = refusal
        raise
