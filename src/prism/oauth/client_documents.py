"""Client ID metadata documents (MCP 2025-11-25, draft-ietf-oauth-client-id-metadata-document).

A client may name itself by an https URL instead of registering: `client_id=https://app.example.com/oauth.json`.
Prism fetches that document (through the SSRF-guarded outbound client, prism.kit.outbound: no private or
loopback targets unless PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS, checked before any connection as a saved URL is,
no redirects, at most MAX_BYTES within FETCH_SECONDS), checks that it names the same `client_id` and is a
public client's metadata, and keeps the client it describes in process for the document's
`Cache-Control: max-age` (between MIN_TTL and MAX_TTL seconds, DEFAULT_TTL without one). A document that cannot
be used is remembered as such for FAILURE_TTL, so a client_id cannot make Prism fetch a URL over and over.

Nothing is stored: the client is the document. Its tokens carry the URL as their `client_id`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from prism.config import Settings
from prism.kit.outbound import OutboundClient, OutboundFailed, OutboundTimeout, OutboundUrlRefused, check_url
from prism.kit.timeutil import utcnow
from prism.kit.urls import split_url
from prism.oauth.errors import OAuthError
from prism.oauth.models import OAuthClient
from prism.oauth.schemas import parse_registration

MAX_BYTES = 5 * 1024
FETCH_SECONDS = 5.0
DEFAULT_TTL = 300.0
MIN_TTL = 60.0
MAX_TTL = 86400.0
FAILURE_TTL = 30.0
MAX_CACHED = 1000
# A client_id is kept in columns of 128 characters (grants, governance), so a longer URL cannot name a client.
MAX_URL_LENGTH = 128
MAX_AGE = re.compile(r"max-age=(\d+)")

log = logging.getLogger("prism.oauth")


class ClientDocumentRefused(OAuthError):
    """The document at a URL client_id cannot describe a client (RFC 6749 `invalid_client`)."""

    code, status = "invalid_client", 401


def is_document_url(client_id: str | None) -> bool:
    return bool(client_id) and str(client_id).startswith("https://")


def check_document_url(client_id: str) -> None:
    if len(client_id) > MAX_URL_LENGTH:
        raise ClientDocumentRefused(f"a client_id URL is at most {MAX_URL_LENGTH} characters")
    parts = split_url(client_id)
    if parts is None:
        raise ClientDocumentRefused("a client_id URL must be a valid URL (an IPv6 address in [brackets])")
    segments = parts.path.split("/")
    if (not parts.hostname or parts.username or parts.password or parts.fragment or "#" in client_id
            or parts.path in ("", "/") or "." in segments or ".." in segments):
        raise ClientDocumentRefused("a client_id URL must be https with a host and a path, without credentials, "
                                    "a fragment or dot segments")


@dataclass(frozen=True, slots=True)
class _Entry:
    client: OAuthClient | None
    refusal: str | None
    until: float


class ClientDocuments:
    """The clients named by URL, fetched on first use and kept for their cache lifetime."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._entries: dict[str, _Entry] = {}

    def is_fresh(self, client_id: str) -> bool:
        """Whether `client` would answer from the cache, without fetching."""
        entry = self._entries.get(client_id)
        return entry is not None and entry.until > time.monotonic()

    async def client(self, client_id: str) -> OAuthClient:
        """The client the document at `client_id` describes, or ClientDocumentRefused saying why not."""
        check_document_url(client_id)
        entry = self._entries.get(client_id)
        if entry is None or entry.until <= time.monotonic():
            entry = await self._fetch(client_id)
            if len(self._entries) >= MAX_CACHED:
                self._entries.pop(next(iter(self._entries)))
            self._entries[client_id] = entry
        if entry.client is None:
            raise ClientDocumentRefused(entry.refusal or "client metadata document refused")
        return entry.client

    async def _fetch(self, url: str) -> _Entry:
        now = time.monotonic()
        allow_private = self.settings.webhook_allow_private_networks
        try:
            async with asyncio.timeout(FETCH_SECONDS):  # the name's resolution included
                await check_url(url, field="client_id", allow_private_networks=allow_private)
            async with OutboundClient(allow_private_networks=allow_private, ca_bundle=self.settings.webhook_ca_bundle,
                                      max_connections=4) as outbound:
                answer = await outbound.send("GET", url, headers={"Accept": "application/json"}, body=None,
                                             timeout_seconds=FETCH_SECONDS, read_at_most=MAX_BYTES)
        except OutboundUrlRefused:
            # Said the same way whatever the host resolved to (or whether it resolved): an anonymous caller
            # learns nothing of Prism's network from it.
            return _Entry(None, "a client_id URL must name a public host (not a private, loopback or link-local "
                                "address)", now + FAILURE_TTL)
        except (TimeoutError, OutboundTimeout):
            return _Entry(None, f"client metadata document could not be fetched: timed out after "
                                f"{FETCH_SECONDS:g} s", now + FAILURE_TTL)
        except OutboundFailed as exc:
            # Not the reason (refused, reset, a TLS error): it would tell an anonymous caller what listens where.
            log.info("client metadata document %s could not be fetched: %s", url, exc)
            return _Entry(None, "client metadata document could not be fetched", now + FAILURE_TTL)
        if answer.status != 200:
            return _Entry(None, f"client metadata document answered HTTP {answer.status}", now + FAILURE_TTL)
        if answer.truncated:
            return _Entry(None, f"client metadata document exceeds {MAX_BYTES} bytes", now + FAILURE_TTL)
        try:
            client = client_from_document(url, answer.body)
        except OAuthError as exc:
            return _Entry(None, f"client metadata document is not usable: {exc.message}", now + FAILURE_TTL)
        return _Entry(client, None, now + _ttl(answer.headers.get("cache-control")))


def _ttl(cache_control: str | None) -> float:
    found = MAX_AGE.search(cache_control or "")
    if found is None:
        return DEFAULT_TTL
    return min(MAX_TTL, max(MIN_TTL, float(found.group(1))))


def client_from_document(url: str, body: bytes) -> OAuthClient:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise OAuthError("not JSON") from None
    if not isinstance(document, dict):
        raise OAuthError("not a JSON object")
    if document.get("client_id") != url:
        raise OAuthError("its client_id must be the URL it is served from")
    if "client_secret" in document or "client_secret_expires_at" in document:
        raise OAuthError("it must not carry a client secret")
    if document.get("token_endpoint_auth_method", "none") != "none":
        raise OAuthError("token_endpoint_auth_method must be none (a document cannot hold a secret)")
    registration = parse_registration({**document, "client_id": None})
    host = urlsplit(url).hostname or url
    return OAuthClient(client_id=url, client_name=f"{registration.client_name} ({host})",
                       redirect_uris=registration.redirect_uris, grant_types=registration.grant_types,
                       response_types=registration.response_types,
                       token_endpoint_auth_method=registration.token_endpoint_auth_method,
                       scope=registration.scope, extra=registration.extra, secret_hash=None, fingerprint="",
                       created_at=utcnow())


def client_documents(state: Any) -> ClientDocuments:
    """The app's cache of URL-named clients, made with its first use."""
    documents: ClientDocuments | None = getattr(state, "client_documents", None)
    if documents is None:
        documents = state.client_documents = ClientDocuments(state.settings)
    return documents
