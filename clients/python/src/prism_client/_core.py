"""What the sync and async clients share: building requests and reading answers (when to retry: retries.py).

Only sending and sleeping differ between the two clients; everything that decides is here or in retries.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from prism_client.errors import PrismAPIError, PrismConnectionError, error_for
from prism_client.retries import IDEMPOTENT_METHODS, retry_after_seconds

USER_AGENT = "prism-client-python/0.4.0"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
IDEMPOTENCY_HEADER = "Idempotency-Key"
SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    form: dict[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Answers that are not errors for this call (304 for a conditional descriptor fetch).
    ok_statuses: frozenset[int] = frozenset()
    # Sent on every attempt of this call, so that Prism runs it once however often it is sent.
    idempotency_key: str | None = None

    @property
    def repeatable(self) -> bool:
        """Whether sending this call again cannot run it twice (see retries.py)."""
        return self.method in IDEMPOTENT_METHODS or self.idempotency_key is not None

    def build(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {k: _query_value(v) for k, v in (self.params or {}).items() if v is not None}
        headers = dict(self.headers)
        if self.idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = self.idempotency_key
        kwargs: dict[str, Any] = {"params": params or None}
        if self.form is not None:
            kwargs["data"] = self.form
        elif self.json is not None:
            kwargs["content"] = json_body(self.json)
            headers["Content-Type"] = "application/json"
        return client.build_request(self.method, self.path, headers=headers or None, **kwargs)


def json_body(value: Any) -> bytes:
    """The JSON text of a body as UTF-8, a surrogate code point escaped (`\\ud800`) as JSON.stringify escapes it.

    A Python str may hold a lone surrogate, which UTF-8 cannot encode (httpx's own encoding fails on it with
    UnicodeEncodeError). Escaped, it is valid JSON text that Prism reads and refuses as every door refuses a
    string it cannot store, 400 invalid_json: the BadRequestError the TypeScript client gets for it too. A pair
    of surrogates held as two code points becomes the character they encode, as in JSON.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text).encode()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def segment(value: str) -> str:
    return quote(value, safe="")


def default_headers(api_key: str | None, extra: dict[str, str] | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


def connection_error(call: Call, exc: Exception) -> PrismConnectionError:
    if call.repeatable:
        return PrismConnectionError(f"{call.method} {call.path}: {exc}")
    return PrismConnectionError(f"{call.method} {call.path}: {exc} (not sent again: it carries no idempotency key, "
                                "so Prism may have run it)")


def body_of(response: httpx.Response) -> Any:
    if not response.content:
        return None
    if "json" in response.headers.get("content-type", ""):
        try:
            return response.json()
        except ValueError:
            pass
    return response.text


def check(response: httpx.Response, call: Call) -> Any:
    """The decoded body, or the PrismAPIError the answer means."""
    body = body_of(response)
    status = response.status_code
    if status in call.ok_statuses:
        return body
    if 300 <= status < 400:
        raise redirect_error(response, body)
    if status >= 400:
        raise error_for(status, body, retry_after_seconds(response))
    return body


def redirect_error(response: httpx.Response, body: Any) -> PrismAPIError:
    """Prism's API never redirects: a 3xx comes from something in front of it (http:// behind TLS, another host),
    and its body is not the answer asked for. Followed, a POST would turn into a GET; returned, it would pass a
    redirect page off as the result (a delete that deleted nothing)."""
    location = response.headers.get("location") or "(no Location)"
    return PrismAPIError(response.status_code, "unexpected_redirect",
                         f"redirected to {location}; Prism does not redirect its API: check the base URL", body=body)


def unwrap(body: Any, status: int = 200) -> Any:
    """The data of a PrismResponse envelope; `success: false` becomes the matching exception."""
    if not isinstance(body, dict) or "success" not in body:
        raise PrismAPIError(status, "unexpected_response", "the answer is not a PrismResponse envelope", body=body)
    if body["success"] is not True:  # an error status, or 202 when a governance rule holds the call for review
        raise error_for(status, body, None)
    return body.get("data")


def coordinate_path(mega_tool: str, app: str, entity: str, operation: str) -> str:
    return "/prism/" + "/".join(segment(p) for p in (mega_tool, app, entity, operation))


def tool_path(tool_name: str) -> str:
    return f"/api/mcp/tools/{segment(tool_name)}/"


def webhook_path(webhook_id: str | None = None, *rest: str) -> str:
    parts = [segment(webhook_id)] if webhook_id else []
    parts += [segment(r) for r in rest]
    return WEBHOOKS + "".join(p + "/" for p in parts)
