"""Why an upstream could not be read, as Prism keeps and shows it (an integration's `last_error`, a refused add
or refresh, a call's record).

The text of an exception is not fit to show as it is: it may carry the URL it was sent to with a token in its
query string or `user:password@` before its host, the addresses of the deployment's own network, or what the
upstream answered (which may echo the credential it was sent). So every such text is made here, by
`failure_of`, in two forms: a short classified `reason` in Prism's own words, which is all an organization is
shown of the deployment's integrations, and the `detail` — the exception's text with every URL cut to its
address and the connection's credential withheld — for the operator and for an organization's own integration.
Neither holds a credential, so neither puts one in the database. docs/integrations.md, "What `last_error`
shows to whom".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from prism.errors import PrismError
from prism.integrations.credentials import Credential, withheld
from prism.integrations.mcp_limits import PastLimits
from prism.integrations.shown_urls import address_only, url_secrets
from prism.kit.outbound import OutboundFailed, OutboundTimeout
from prism.kit.secret import MASK

DETAIL_CHARS = 1000
URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>()\[\]{}]+", re.I)
# A value of a URL's query string, or its password, is withheld wherever it appears on its own from this length:
# shorter ones would garble the text without hiding anything a guess would not find.
SHORTEST_URL_SECRET = 4


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str  # classified, in Prism's words: what any organization that may see the integration is shown
    detail: str  # the exception's text without credentials: the operator's, and an organization's of its own


def failure_of(exc: BaseException, *, urls: Iterable[str] = (), credential: Credential | None = None,
               bearer: str | None = None) -> Failure:
    """`exc` (the innermost of an exception group) classified, and its text without the credentials of `urls` (the
    userinfo, the query string and each of its values, the fragment) or of `credential` (every form of it)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    detail = without_credentials(_text(exc), urls=urls, credential=credential, bearer=bearer)
    # Past the limits, the message is Prism's own (the tool and the limit): the reason itself.
    return Failure(detail if isinstance(exc, PastLimits) else _reason(exc, detail), detail)


def without_credentials(text: str, *, urls: Iterable[str] = (), credential: Credential | None = None,
                        bearer: str | None = None) -> str:
    """`text` with each URL in it cut to its address (`address_only`), and the credentials of `urls` and of
    `credential` withheld wherever else they appear."""
    urls = tuple(urls)  # read twice
    # Any text passes, lone surrogates included (an exception may carry what it read undecoded).
    text = withheld(text.encode("utf-8", "surrogatepass"), credential=credential, bearer=bearer,
                    urls=urls).decode("utf-8", "surrogatepass")
    text = URL_IN_TEXT.sub(lambda found: address_only(found.group()), text)
    return without_url_secrets(text, urls)[:DETAIL_CHARS]


def without_url_secrets(text: str, urls: Iterable[str]) -> str:
    """`text` with what `urls` carry besides their address (userinfo, the query string and each of its values, the
    fragment) withheld wherever it appears, the rest as it is: an upstream's answer that echoes a URL."""
    found = {s for url in urls for s in url_secrets(url) if len(s) >= SHORTEST_URL_SECRET}
    for secret in sorted(found, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def _text(exc: BaseException) -> str:
    """Prism's message; the upstream's own (a JSON-RPC error's); else the exception's kind and text."""
    if isinstance(exc, PrismError):
        return exc.message
    if _answered_error(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _answered_error(exc: BaseException) -> bool:
    try:
        from mcp import MCPError
    except ImportError:  # the federation extra is not installed: nothing of the MCP client raised it
        return False
    return isinstance(exc, MCPError)


def _reason(exc: BaseException, detail: str) -> str:
    if isinstance(exc, PrismError):
        status = (exc.details or {}).get("upstream_status")
        return {"upstream_timeout": "the upstream did not answer in time",
                "upstream_unreachable": "the upstream could not be reached",
                "url_not_allowed": "the upstream's URL is refused by the outbound rules",
                "invalid_openapi": f"the description could not be compiled: {detail}",
                "upstream_error": f"the upstream answered HTTP {status}" if isinstance(status, int)
                else "the upstream answered with an error"}.get(exc.code, f"the upstream could not be read "
                                                                           f"({exc.code})")
    if isinstance(exc, TimeoutError | OutboundTimeout):
        return "the upstream did not answer in time"
    if isinstance(exc, OutboundFailed):
        return "the upstream could not be reached"
    if _answered_error(exc):
        return f"the upstream answered with an error (JSON-RPC {getattr(exc, 'code', '')})"
    try:
        import httpx2
    except ImportError:  # the federation extra is not installed: nothing of the MCP client raised it
        return "the upstream could not be reached"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the upstream answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.SSEError):
        return "the upstream answered what Prism could not read"
    # Transports raise many kinds of exception; all mean the upstream was not reached.
    return "the upstream could not be reached"


def kept_text(failure: Failure, *, owner_organization_id: str | None) -> str:
    """What an integration keeps (and shows) of a failure: of the deployment's, shared by every organization, the
    reason; of an organization's own, the detail (its own upstream, without credentials)."""
    return failure.reason if owner_organization_id is None else failure.detail
