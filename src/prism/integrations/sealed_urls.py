"""An integration's URLs at rest: what a URL may carry besides its address is sealed.

A URL's query string and fragment may carry a credential (`?token=...`, `?api_key=...`): real MCP servers and APIs
are reached so. The column that holds a URL keeps it in the clear only as `scheme://host[:port]/path` with each
query value and the fragment withheld (`?token=********`: prism.kit.urls.without_secrets), enough to list, search
and show it; the URL as given is sealed with AES-256-GCM in the row's `sealed_urls` (under a key derived from the
master secret for this purpose alone, bound to the row's id, as a connection's credential is:
prism.integrations.credentials). It is opened only where Prism sends a request to it. docs/integrations.md,
"Credentials written into URLs".
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from prism.config import Settings
from prism.kit.secret import decrypt, derived_key, encrypt
from prism.kit.urls import without_secrets

PURPOSE = "integration-url-secrets"


def seal_urls(settings: Settings, row_id: str, urls: Mapping[str, str | None]) -> str | None:
    """The URLs (by field) whose column cannot keep them whole, sealed for the row `row_id`; None when none."""
    kept = {field: url for field, url in urls.items() if url and without_secrets(url) != url}
    if not kept:
        return None
    return encrypt(derived_key(settings, PURPOSE), orjson.dumps(kept), row_id)


def opened_urls(settings: Settings, row_id: str, sealed: str | None) -> dict[str, str]:
    """What `seal_urls` sealed for the row (a field it did not seal is whole in its column)."""
    if not sealed:
        return {}
    value = orjson.loads(decrypt(derived_key(settings, PURPOSE), sealed, row_id))
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}
