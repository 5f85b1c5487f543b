"""A connection's credential: kinds, what of it is secret, and its encryption at rest.

The secret part (API key, token, password, client secret) is encrypted with AES-256-GCM under a key derived
from the master secret for this purpose alone, bound to the connection's row id: it is never stored in
plaintext, never returned by any handler or command, and never written to a log. An upstream that echoes
the request it got (a gateway's error page, a debugging endpoint) would hand it to whoever called: what
Prism passes on from an upstream has the credential's forms withheld first (`withheld`), and so have the keys
written into the connection's URLs.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, quote_plus

import orjson

from prism.config import Settings
from prism.errors import InvalidArguments
from prism.integrations.shown_urls import url_secrets
from prism.kit.secret import MASK, decrypt, derived_key, encrypt

AuthKind = Literal["none", "api_key", "bearer", "basic", "oauth2_client_credentials"]
AUTH_KINDS: tuple[str, ...] = ("none", "api_key", "bearer", "basic", "oauth2_client_credentials")
PURPOSE = "integration-connection-credentials"
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}\Z")
# Shorter forms are not withheld: replacing every occurrence of a few characters would garble the answer
# without hiding anything a guess would not find.
SHORTEST_WITHHELD = 8


@dataclass(frozen=True, slots=True)
class Credential:
    kind: str
    settings: dict[str, Any]  # not secret: header name, user name, token URL, client id, scope
    secret: str  # API key, token, password or client secret; "" for none

    def headers(self, bearer: str | None = None) -> dict[str, str]:
        """The headers that carry it (OAuth: the access token obtained with it, `bearer`)."""
        if self.kind == "api_key":
            return {self.settings["header"]: self.secret}
        if self.kind == "bearer":
            return {"Authorization": f"Bearer {self.secret}"}
        if self.kind == "basic":
            pair = f"{self.settings['username']}:{self.secret}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
        if self.kind == "oauth2_client_credentials" and bearer:
            return {"Authorization": f"Bearer {bearer}"}
        return {}

    def secrets(self, bearer: str | None = None) -> tuple[str, ...]:
        """What of it is secret, as sent: the secret, the OAuth access token, a Basic `user:password` pair, and
        what the token URL carries besides its address (a key in its query string)."""
        plain = [self.secret, bearer or ""]
        if self.kind == "basic":
            plain.append(f"{self.settings['username']}:{self.secret}")
        plain += url_secrets(str(self.settings.get("token_url") or ""))
        return tuple(filter(None, plain))


def withheld(body: bytes, *, credential: Credential | None = None, bearer: str | None = None,
             urls: Iterable[str] = ()) -> bytes:
    """`body` (whatever Prism passes on from an upstream: an answer, its excerpt, an MCP tool's result, a failure's
    text) with every form of the connection's credential, and of what `urls` carry besides their address (a key
    written into a base URL's query string, kept as a connection's secret is), replaced by the mask. An upstream
    that echoes the request it got (a gateway's error page, a debugging endpoint) would otherwise hand them to
    whoever called, who may not even read the connection."""
    values = [*(credential.secrets(bearer) if credential is not None else ()),
              *(secret for url in urls for secret in url_secrets(url))]
    for form in _forms(values):
        body = body.replace(form, MASK.encode())
    return body


def _forms(values: Iterable[str]) -> tuple[bytes, ...]:
    """Every form in which `values` may come back from an upstream: as sent, base64-encoded (a Basic pair is) and
    percent-encoded, each also as a JSON string holds it (an upstream echoing the request as JSON escapes `"` and
    `\\`, and PHP's encoder `/`, Go's `<>&`), longest first (a form inside another is withheld with it)."""
    found: set[str] = set()
    for value in values:
        raw = value.encode()
        encoded = (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode())
        found |= {value, quote(value, safe=""), quote_plus(value), *encoded, *(e.rstrip("=") for e in encoded)}
    found |= {escaped for form in found for escaped in _json_escaped(form)}
    kept = (f.encode() for f in found if len(f) >= SHORTEST_WITHHELD)
    return tuple(sorted(kept, key=len, reverse=True))


def _json_escaped(form: str) -> set[str]:
    """`form` as JSON encoders write it inside a string: escaped minimally (orjson, Python's with non-ASCII kept),
    with non-ASCII as `\\u` escapes (Python's default), `/` as `\\/` (PHP's), `<>&` as `\\u003c`... (Go's)."""
    escaped = {json.dumps(form, ensure_ascii=ascii_only)[1:-1] for ascii_only in (True, False)}
    go_style = {e.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") for e in escaped}
    every = escaped | go_style
    return every | {e.replace("/", "\\/") for e in every}


def checked(kind: str, settings: dict[str, Any], secret: str | None) -> tuple[dict[str, Any], str]:
    """The credential's non-secret settings and its secret, refused with the field named when incomplete."""
    def refuse(field: str, message: str) -> InvalidArguments:
        return InvalidArguments(f"{field}: {message}", details={"field": field})

    if kind not in AUTH_KINDS:
        raise refuse("auth_kind", f"one of {', '.join(AUTH_KINDS)}")
    secret = secret or ""
    if any(c in secret for c in "\r\n\x00"):
        raise refuse("secret", "must be one line")
    if kind == "none":
        return {}, ""
    if not secret:
        raise refuse("secret", f"required for {kind}")
    if kind == "api_key":
        header = str(settings.get("header") or "")
        if not HEADER_NAME.match(header):
            raise refuse("header", "the header that carries the API key (letters, digits, -)")
        return {"header": header}, secret
    if kind == "basic":
        username = str(settings.get("username") or "")
        if not username or ":" in username or any(c in username for c in "\r\n\x00"):
            raise refuse("username", "required for basic, without ':'")
        return {"username": username}, secret
    if kind == "oauth2_client_credentials":
        token_url, client_id = str(settings.get("token_url") or ""), str(settings.get("client_id") or "")
        if not token_url.startswith(("https://", "http://")):
            raise refuse("token_url", "the authorization server's token endpoint (a URL)")
        if not client_id:
            raise refuse("client_id", "required for oauth2_client_credentials")
        return {"token_url": token_url, "client_id": client_id, "scope": str(settings.get("scope") or "")}, secret
    return {}, secret  # bearer


def seal_secret(settings: Settings, connection_id: str, secret: str) -> str | None:
    if not secret:
        return None
    return encrypt(derived_key(settings, PURPOSE), orjson.dumps(secret), connection_id)


def open_secret(settings: Settings, connection_id: str, stored: str | None) -> str:
    if not stored:
        return ""
    value = orjson.loads(decrypt(derived_key(settings, PURPOSE), stored, connection_id))
    return value if isinstance(value, str) else ""
