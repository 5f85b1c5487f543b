"""What the sync and async clients share: building requests, the retry policy, reading answers.

Only sending and sleeping differ between the two clients; everything that decides is here.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from prism_client.errors import PrismAPIError, error_for

RETRY_STATUSES = frozenset({429, 502, 503, 504})
USER_AGENT = "prism-client-python/0.4.0"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"


@dataclass(frozen=True)
class RetryPolicy:
    """429/502/503/504 are retried up to `max_retries` times. The wait is Retry-After when Prism sends it
    (capped at `max_retry_after`), else exponential backoff with full jitter: random(0, base * 2^n), at
    most `backoff_max`."""

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return random.uniform(0, min(self.backoff_max, self.backoff_base * (2 ** attempt)))


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

    def build(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {k: _query_value(v) for k, v in (self.params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"params": params or None, "headers": self.headers or None}
        if self.form is not None:
            kwargs["data"] = self.form
        elif self.json is not None:
            kwargs["json"] = self.json
        return client.build_request(self.method, self.path, **kwargs)


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


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def should_retry(response: httpx.Response, attempt: int, policy: RetryPolicy) -> bool:
    return response.status_code in RETRY_STATUSES and attempt < policy.max_retries


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
    if status >= 400:
        raise error_for(status, body, retry_after_seconds(response))
    return body


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
