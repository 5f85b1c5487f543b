"""RS256 signing keys: creation, rotation, encryption at rest, and the per-process key ring.

Private keys are stored encrypted with AES-256-GCM under a key derived (HKDF) from the deployment's master
secret (prism.kit.secret), with the kid as associated data: a copy of the database alone cannot sign
tokens, and a row cannot be swapped for another. Rotation makes a new key the signer and retires the old
one; a retired key stays in the JWKS (so its tokens verify) until every token it signed has expired.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.config import Settings
from prism.kit.ids import random_token
from prism.kit.secret import Undecryptable, decrypt, derived_key, encrypt
from prism.kit.timeutil import utcnow
from prism.oauth.models import OAuthSigningKey
from prism.storage import Database

log = logging.getLogger("prism.oauth")
KEY_BITS = 2048
RING_TTL_SECONDS = 60.0
# An unknown kid triggers a reload (a key rotated by another process), at most this often.
UNKNOWN_KID_RELOAD_SECONDS = 5.0
RETIRED_GRACE_SECONDS = 300


def _b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def encrypt_private_key(settings: Settings, kid: str, pem: bytes) -> str:
    return encrypt(derived_key(settings, "oauth-signing-keys"), pem, kid)


def decrypt_private_key(settings: Settings, kid: str, stored: str) -> rsa.RSAPrivateKey:
    pem = decrypt(derived_key(settings, "oauth-signing-keys"), stored, kid)
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def _new_key_row(settings: Settings) -> OAuthSigningKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    numbers = private.public_key().public_numbers()
    kid = f"{utcnow():%Y%m%d}-{random_token(12)}"
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    jwk = {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": _b64(numbers.n), "e": _b64(numbers.e)}
    return OAuthSigningKey(kid=kid, public_jwk=jwk, private_key_encrypted=encrypt_private_key(settings, kid, pem),
                           created_at=utcnow())


async def rotate(session: AsyncSession, settings: Settings) -> OAuthSigningKey:
    """Make a new key the signer; the previous ones retire (still published until their tokens expire)."""
    now = utcnow()
    await session.execute(update(OAuthSigningKey).where(OAuthSigningKey.retired_at.is_(None)).values(retired_at=now))
    row = _new_key_row(settings)
    session.add(row)
    await session.flush()
    return row


def _published(settings: Settings) -> Any:
    oldest = utcnow() - timedelta(seconds=settings.oauth_access_token_seconds + RETIRED_GRACE_SECONDS)
    return or_(OAuthSigningKey.retired_at.is_(None), OAuthSigningKey.retired_at > oldest)


@dataclass(frozen=True)
class _Ring:
    signer_kid: str | None
    signer: rsa.RSAPrivateKey | None
    public: dict[str, rsa.RSAPublicKey]
    jwks: list[dict[str, Any]]
    loaded: float


class KeyRing:
    """The keys this process signs and verifies with, reloaded every minute and on an unknown kid."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self._ring: _Ring | None = None
        self._lock = asyncio.Lock()
        self._last_forced = 0.0

    async def _load(self) -> _Ring:
        async with self.db.read() as session:
            rows = list((await session.execute(select(OAuthSigningKey).where(_published(self.settings))
                                                .order_by(OAuthSigningKey.created_at.desc()))).scalars())
        signer_kid, signer = self._usable_signer(rows)
        if signer is None:
            async with self.db.write() as session:
                # Another process may have created one meanwhile; either key verifies, both are published.
                row = _new_key_row(self.settings)
                session.add(row)
            rows.insert(0, row)
            signer_kid, signer = self._usable_signer(rows)
        public: dict[str, rsa.RSAPublicKey] = {}
        for row in rows:
            numbers = rsa.RSAPublicNumbers(_int(row.public_jwk["e"]), _int(row.public_jwk["n"]))
            public[row.kid] = numbers.public_key()
        jwks = [{k: r.public_jwk[k] for k in ("kty", "kid", "use", "alg", "n", "e")} for r in rows]
        return _Ring(signer_kid, signer, public, jwks, time.monotonic())

    def _usable_signer(self, rows: list[OAuthSigningKey]) -> tuple[str | None, rsa.RSAPrivateKey | None]:
        """The newest active key this process can decrypt (all of them, unless the master secret changed)."""
        for row in rows:
            if row.retired_at is not None:
                continue
            try:
                return row.kid, decrypt_private_key(self.settings, row.kid, row.private_key_encrypted)
            except Undecryptable:
                log.warning("signing key %s was encrypted under another master secret; not signing with it. "
                            "Every process of a deployment needs the same PRISM_SECRET_KEY.", row.kid)
        return None, None

    async def _current(self, *, force: bool = False) -> _Ring:
        ring = self._ring
        if ring is not None and not force and time.monotonic() - ring.loaded < RING_TTL_SECONDS:
            return ring
        async with self._lock:
            if self._ring is ring or self._ring is None:
                self._ring = await self._load()
            return self._ring

    async def signer(self) -> tuple[str, rsa.RSAPrivateKey]:
        ring = await self._current()
        assert ring.signer_kid is not None and ring.signer is not None
        return ring.signer_kid, ring.signer

    async def public_key(self, kid: str) -> rsa.RSAPublicKey | None:
        ring = await self._current()
        key = ring.public.get(kid)
        if key is None and time.monotonic() - self._last_forced > UNKNOWN_KID_RELOAD_SECONDS:
            self._last_forced = time.monotonic()
            key = (await self._current(force=True)).public.get(kid)
        return key

    async def jwks(self) -> list[dict[str, Any]]:
        return (await self._current()).jwks

    def forget(self) -> None:
        self._ring = None


def _int(b64: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)), "big")
