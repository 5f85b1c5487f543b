"""An endpoint's URLs: checked before the call's transaction, kept with their query sealed.

A base URL's query string often carries the external system's key (`?api_key=...`). Its column keeps the URL with
each query value withheld (`?api_key=********`), which lists, reads, search and the call log show; the URL as
given is sealed in the row's `sealed_urls`, as an imported connection's is (prism.integrations.sealed_urls), and
opened only to send a call. A call's URL is kept in its log the same way. docs/integrations.md, "Endpoints".

The save-time SSRF check resolves the host (up to RESOLVE_WITHIN_SECONDS): it runs in the handlers' `prepare`,
before the ledger transaction every call of the process may wait on.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from prism.apps.integrations.models import Endpoint
from prism.config import Settings
from prism.integrations.sealed_urls import opened_urls, seal_urls
from prism.kit.outbound import OutboundUrlRefused, check_url
from prism.kit.urls import without_secrets

BASE_URL_CHARS, CALL_URL_CHARS = 2048, 4096  # the columns' lengths

# A base URL as `checked_base_url` found it: the URL to save, why it is refused, or None when none was sent.
CheckedUrl = str | OutboundUrlRefused | None


async def checked_base_url(p: Any, settings: Settings) -> CheckedUrl:
    """The create and update handlers' `prepare`: `p.base_url` checked (its host resolved) outside any transaction.
    The refusal is returned, not raised: the handler raises it where it checked the URL before (after the caller's
    own refusals, an unknown id first)."""
    url: str | None = p.base_url
    if url is None:
        return None
    try:
        return await check_url(url.rstrip("/"), field="base_url",
                               allow_private_networks=settings.webhook_allow_private_networks)
    except OutboundUrlRefused as exc:
        return exc


def base_url_columns(settings: Settings, endpoint_id: str, checked: CheckedUrl) -> dict[str, Any]:
    """The endpoint's `base_url` and `sealed_urls` for the URL `checked_base_url` accepted (or its refusal, raised)."""
    if isinstance(checked, OutboundUrlRefused):
        raise checked
    assert checked is not None, "checked_base_url ran on the base_url sent"
    return {"base_url": without_secrets(checked)[:BASE_URL_CHARS],
            "sealed_urls": seal_urls(settings, endpoint_id, {"base_url": checked})}


def real_base_url(settings: Settings, endpoint: Endpoint) -> str:
    """The base URL as it was given, its query's values included."""
    return opened_urls(settings, endpoint.id, endpoint.sealed_urls).get("base_url", endpoint.base_url)


def call_url(base_url: str, path: str, query: dict[str, str]) -> str:
    """`path` appended to the base URL's path, the call's `query` after the base URL's own (its key, say)."""
    parts = urlsplit(base_url)
    joined = "&".join(q for q in (parts.query, urlencode(query)) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path + path, joined, ""))  # a fragment is never sent


def call_url_columns(settings: Settings, log_id: str, url: str) -> dict[str, Any]:
    """A call log's `url` and `sealed_urls` for the URL the call was sent to."""
    return {"url": without_secrets(url)[:CALL_URL_CHARS], "sealed_urls": seal_urls(settings, log_id, {"url": url})}
