"""One HTTP request as the edge observes it: the X-Request-ID header on its answer, then, once it is answered,
its access line, its counts, and a security line when it was refused for its credential or its rate.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import Message, Scope, Send

from prism.edge.context import RequestContext
from prism.edge.paths import ROOT_ALIASES, policy_for
from prism.observability import metrics
from prism.observability.logs import ACCESS, security_event, write
from prism.observability.request_id import REQUEST_ID_HEADER

LOCKED_OUT_CODE = "too_many_failed_attempts"
MAX_LOGGED_PATH = 512

# Door of a request no dispatch named, by path prefix (first match wins; the dispatching doors are named as in
# the ledger: rest is the canonical /api/mcp/tools/ door); the rest are pages.
_DOOR_PREFIXES = (
    ("/api/mcp/tools/", "rest"), ("/prism/", "prism_path"), ("/api/v1/dev/", "sandbox"),
    ("/api/mcp/sse", "mcp"), ("/api/mcp/oauth/", "oauth"), ("/.well-known/oauth", "oauth"),
    ("/.well-known/openid", "oauth"), ("/.well-known/", "discovery"), ("/api/mcp/api-keys/", "keys"),
    ("/api/v1/risk-assessment/governance/webhooks", "webhooks"), ("/healthz", "health"), ("/readyz", "health"),
    ("/metrics", "metrics"),
)
_STATUS_CLASS = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}


def door_of_path(path: str) -> str:
    if path in ROOT_ALIASES:  # /authorize, /token, /register: the OAuth endpoints they alias
        return "oauth"
    for prefix, door in _DOOR_PREFIXES:
        if path.startswith(prefix):
            return door
    return "page"


class Exchange:
    __slots__ = ("context", "scope", "send", "started", "status")

    def __init__(self, scope: Scope, context: RequestContext, send: Send, started: float) -> None:
        self.scope = scope
        self.context = context
        self.send = send
        self.started = started
        self.status = 0

    async def answer(self, message: Message) -> None:
        """The app's `send`: every answer carries the request id."""
        if message["type"] == "http.response.start":
            self.status = message["status"]
            message = {**message, "headers": [*message.get("headers", ()),
                                              (REQUEST_ID_HEADER, self.context.request_id.encode())]}
        await self.send(message)

    def finish(self) -> None:
        context, scope = self.context, self.scope
        status = self.status or 500  # the app raised before answering: the server answers 500
        path: str = scope["path"]
        door = context.door or door_of_path(path)
        metrics.requests_counted(door, _STATUS_CLASS.get(status // 100, "other"), context.tool or "none").inc()
        auth = context.auth
        fields: dict[str, Any] = {
            "method": scope["method"], "path": path[:MAX_LOGGED_PATH], "status": status,
            "duration_ms": round((time.perf_counter() - self.started) * 1000, 3),
            "tenant": auth.tenant_subdomain if auth else context.host.subdomain,
            "org": auth.organization_id if auth else None,
            "credential": (auth.client_id or auth.key_prefix) if auth else None,
            "tool": context.coordinate, "request_id": context.request_id, "door": door, "address": context.address}
        write(ACCESS, logging.INFO, "request", fields)
        if status == 429:
            self._refused_for_rate(door, path)
        elif (status == 401 and self._carried_credential(path)) or self.context.authentication_failed:
            metrics.AUTHENTICATION_FAILURES.labels(door).inc()
            security_event("authentication_failed", door=door, path=path[:MAX_LOGGED_PATH], address=context.address,
                           request_id=context.request_id)

    def _refused_for_rate(self, door: str, path: str) -> None:
        context = self.context
        refusal = context.refusal
        locked = refusal is not None and refusal.code == LOCKED_OUT_CODE
        (metrics.LOCKOUT_REFUSALS if locked else metrics.RATE_LIMIT_REFUSALS.labels(door)).inc()
        security_event("locked_out" if locked else "rate_limited", door=door, path=path[:MAX_LOGGED_PATH],
                       address=context.address, request_id=context.request_id)

    def _carried_credential(self, path: str) -> bool:
        """A 401 to a request that sent no credential is an invitation to authenticate, not a failed attempt."""
        return "authorization" in self.context.headers or policy_for(path).checks_secret
