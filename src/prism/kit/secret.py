"""The deployment's master secret and the purpose-bound keys derived from it.

The master secret never reaches the database: it comes from PRISM_SECRET_KEY or, when that is unset, from a
file created once with mode 0600 (PRISM_SECRET_KEY_FILE). Each use (cookie signing, key encryption) gets
its own key through HKDF, so one derived key never serves two purposes.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from prism.config import Settings
from prism.errors import PrismError

# What a secret shows as wherever it is read back (a webhook's custom headers, a secret field of a call under review).
MASK = "********"
# A secret field of a handler's parameters, in its JSON Schema: sent, never read back (oversight masks it).
WRITE_ONLY: dict[str, Any] = {"writeOnly": True}
# A URL field of a handler's parameters whose query values may carry a credential (`?api_key=...`): read back with
# them withheld (prism.kit.urls.without_secrets), in what Prism keeps and shows (oversight does so too).
URL_WITH_SECRETS_KEY = "x-prism-url-secrets"
URL_WITH_SECRETS: dict[str, Any] = {URL_WITH_SECRETS_KEY: True}
# An object of query-string parameters a handler sends (`{"api_key": "..."}`): each value is treated as a URL's query
# value is, as a possible credential, so what Prism shows of it names each parameter with its value withheld.
QUERY_WITH_SECRETS_KEY = "x-prism-query-secrets"
QUERY_WITH_SECRETS: dict[str, Any] = {QUERY_WITH_SECRETS_KEY: True}


def same_secret(sent: str, expected: str) -> bool:
    """Whether a secret a client sent (a signature, a token) is the expected one, in constant time. Compared as
    UTF-8 bytes: `hmac.compare_digest` raises TypeError for text with characters beyond ASCII, and a client (or
    whoever wrote to the database) may send any."""
    return hmac.compare_digest(sent.encode(), expected.encode())


class UnusableSecret(PrismError):
    """The master secret cannot be had: too short, or its file unreadable or not creatable."""

    code, status = "invalid_setting", 500


def _read_or_create(path: Path) -> bytes:
    try:
        with contextlib.suppress(FileExistsError):
            # O_EXCL: two processes starting together never write two different secrets.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(48))
        value = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableSecret(f"PRISM_SECRET_KEY_FILE: cannot read or create {path} "
                             f"({getattr(exc, 'strerror', None) or exc})") from None
    if len(value) < 32:
        raise UnusableSecret(f"PRISM_SECRET_KEY_FILE: {path} holds no usable secret (at least 32 characters)")
    return value.encode()


@lru_cache(maxsize=8)
def _master(secret_key: str | None, secret_key_file: str) -> bytes:
    if secret_key:
        if len(secret_key) < 32:
            raise UnusableSecret("PRISM_SECRET_KEY must have at least 32 characters")
        return secret_key.encode()
    return _read_or_create(Path(secret_key_file))


def check_master_secret(settings: Settings, *, may_create: bool) -> None:
    """UnusableSecret now, not from the first key derived mid-command: the secret set, or its file.

    Only a command that starts a deployment (`serve`, `migrate`: `may_create`) makes a missing file. Any other
    command run away from the server's directory, against the deployment's database, would otherwise make a
    secret of its own there and sign the audit log and seal secrets with it, which the deployment cannot verify
    or open afterwards: it is refused instead, naming the file it looked for.
    """
    path = Path(settings.secret_key_file)
    if not settings.secret_key and not may_create and not path.exists():
        raise UnusableSecret(
            f"no master secret at {path.resolve()}: PRISM_SECRET_KEY is not set and PRISM_SECRET_KEY_FILE names no "
            "file. Run the command where `prism serve` runs (it made the file there), or set PRISM_SECRET_KEY (or "
            "PRISM_SECRET_KEY_FILE) to the deployment's secret.")
    _master(settings.secret_key, settings.secret_key_file)


def derived_key(settings: Settings, purpose: str, length: int = 32) -> bytes:
    """A key for one purpose (for example "browser-session"), stable for a given master secret."""
    master = _master(settings.secret_key, settings.secret_key_file)
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=b"prism", info=purpose.encode()).derive(master)


def seal(settings: Settings, purpose: str, data: dict[str, Any]) -> str:
    """`data` as a signed (not encrypted) string: the client can read it but not change it."""
    payload = base64.urlsafe_b64encode(orjson.dumps(data)).rstrip(b"=").decode()
    mac = hmac.new(derived_key(settings, purpose), payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


def unseal(settings: Settings, purpose: str, sealed: str) -> dict[str, Any] | None:
    payload, _, mac = sealed.partition(".")
    expected = hmac.new(derived_key(settings, purpose), payload.encode(), hashlib.sha256).hexdigest()
    if not payload or not same_secret(mac, expected):
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


NONCE_BYTES = 12


class Undecryptable(ValueError):
    """Encrypted text that does not open: another key (the master secret changed), another row, or altered."""


def encrypt(key: bytes, plain: bytes, bound_to: str) -> str:
    """`plain` under AES-256-GCM with `key`, as base64 text (nonce, then ciphertext). `bound_to` (the id of the row
    it is stored in) is authenticated with it, so encrypted text copied onto another row does not open."""
    nonce = os.urandom(NONCE_BYTES)
    return base64.b64encode(nonce + AESGCM(key).encrypt(nonce, plain, bound_to.encode())).decode()


def decrypt(key: bytes, stored: str, bound_to: str) -> bytes:
    """What `encrypt` encrypted; `Undecryptable` when it does not open."""
    try:
        raw = base64.b64decode(stored, validate=True)
        return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], bound_to.encode())
    except (InvalidTag, ValueError) as exc:
        raise Undecryptable(f"encrypted value of {bound_to} does not open") from exc
