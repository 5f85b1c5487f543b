"""Mcp-Session-Id: a signed token any Prism process can verify, without shared state.

    <issued unix seconds>.<negotiated protocol version>.<random nonce>.<HMAC-SHA256, hex>

The HMAC covers the tenant, the principal that opened the session (an API key; for OAuth the user and the
client, whichever grant their token came from), the issue time, the version and the nonce, under a key derived
from the deployment's master secret (every process of a deployment has it). The tenant and principal are not in
the token: they come from the request's own Authorization header, so a session presented with another key,
user, client or tenant simply fails to verify, exactly like a forged one, and the token reveals nothing about
who opened it.

A session grants nothing on its own — every request is still authenticated — it only correlates a client's
requests with its handshake.
"""

from __future__ import annotations

import hmac
import secrets
import time

from prism.auth.context import AuthContext
from prism.kit.numbers import whole_number
from prism.kit.secret import same_secret
from prism.mcp_server.revisions import HANDSHAKE


class SessionSigner:
    def __init__(self, key: bytes, *, ttl_seconds: int) -> None:
        self._key = key
        self.ttl_seconds = ttl_seconds

    def _mac(self, auth: AuthContext, issued: str, version: str, nonce: str) -> str:
        message = "|".join((auth.tenant_id, *_principal(auth), issued, version, nonce))
        return hmac.digest(self._key, message.encode(), "sha256").hex()

    def issue(self, auth: AuthContext, version: str, *, now: float | None = None) -> str:
        issued = str(int(time.time() if now is None else now))
        nonce = secrets.token_hex(8)
        return f"{issued}.{version}.{nonce}.{self._mac(auth, issued, version, nonce)}"

    def verify(self, token: str, auth: AuthContext, *, now: float | None = None) -> str | None:
        """The session's protocol version when `token` was issued to this credential and has not expired."""
        parts = token.split(".")
        if len(parts) != 4 or len(token) > 200:
            return None
        issued, version, nonce, mac = parts
        issued_at = whole_number(issued)
        if issued_at is None or version not in HANDSHAKE:
            return None
        if not same_secret(mac, self._mac(auth, issued, version, nonce)):
            return None
        age = (time.time() if now is None else now) - issued_at
        if age < -60 or age > self.ttl_seconds:  # a minute of clock skew between hosts is tolerated
            return None
        return version


def _principal(auth: AuthContext) -> tuple[str, ...]:
    """Who a session belongs to. An API key is its own principal. An OAuth session belongs to the user acting
    through the client, not to one grant: re-authorizing (a new grant, new tokens) keeps the client's session,
    as the specification expects of a client that signs in again mid-session."""
    if auth.credential_kind == "oauth" and auth.client_id is not None:
        return ("oauth", auth.client_id, auth.user_id)
    return (auth.credential_kind, auth.credential_id)
