"""Password hashes (argon2id). Checking one takes tens to hundreds of milliseconds of CPU, so a request checks
it with `password_matches`, on a worker thread: on the event loop it would stall every other request of the
process for that long."""

from __future__ import annotations

import asyncio
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()


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


async def password_matches(password_hash: str | None, password: str) -> bool:
    """Whether `password` is the one hashed (None: no such user, always False, in the same time), checked off
    the event loop."""
    return await asyncio.to_thread(_check, password_hash, password)
