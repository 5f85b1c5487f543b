"""Password hashes (argon2id). Checking one takes tens to hundreds of milliseconds of CPU, so a request checks
it with `password_matches`, on a worker thread: on the event loop it would stall every other request of the
process for that long.

The checks run on a pool of their own, `PRISM_PASSWORD_CHECK_THREADS` threads (one per CPU core by default), and
at most `PRISM_PASSWORD_CHECK_QUEUE` more wait for one. On the shared default pool, 70-100 sign-ins at once
queued there behind each other (and ahead of anything else sent to it) until every client gave up at 60 s; now a
sign-in beyond the queue is answered at once, 503 `password_checks_busy` with Retry-After, and the ones admitted
finish within a few checks' time. API keys and access tokens are never checked on this pool.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from prism.config import Settings
from prism.errors import PrismError

_hasher = PasswordHasher()
# A sign-in refused for the queue comes back after about one check's time of the queue ahead of it.
RETRY_AFTER_SECONDS = 1


class PasswordChecksBusy(PrismError):
    code, status = "password_checks_busy", 503

    def __init__(self) -> None:
        super().__init__("too many sign-ins are being checked right now; try again shortly")
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@lru_cache(maxsize=1)
def _unknown_user_hash() -> str:
    # Verifying against a real hash when the email is unknown keeps both answers equally slow.
    return hash_password("no user has this password")


def _check(password_hash: str | None, password: str) -> bool:
    return verify_password(_unknown_user_hash() if password_hash is None else password_hash, password)


class PasswordChecks:
    """`threads` checks at once on a pool of their own, and at most `queue` more waiting for a thread."""

    def __init__(self, threads: int, queue: int) -> None:
        self.threads = threads
        self.queue = queue
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="prism-password")
        self._admitted = 0  # running or waiting: changed only on the event loop

    async def matches(self, password_hash: str | None, password: str) -> bool:
        if self._admitted >= self.threads + self.queue:
            raise PasswordChecksBusy
        self._admitted += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, _check, password_hash, password)
        finally:
            self._admitted -= 1


@lru_cache(maxsize=4)
def _checks(threads: int, queue: int) -> PasswordChecks:
    # One pool per process for its settings (tests build apps with other bounds in one process).
    return PasswordChecks(threads or os.cpu_count() or 1, queue)


async def password_matches(password_hash: str | None, password: str, settings: Settings) -> bool:
    """Whether `password` is the one hashed (None: no such user, always False, in the same time), checked off
    the event loop. `PasswordChecksBusy` (503) when the checks already running and waiting fill the bound."""
    checks = _checks(settings.password_check_threads, settings.password_check_queue)
    return await checks.matches(password_hash, password)
