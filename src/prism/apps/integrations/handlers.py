"""integrations: configured outbound HTTPS endpoints and `integration_call`, which calls one.

Every URL is checked when it is saved and again when the connection is made (prism.kit.outbound): no
loopback, private, link-local or metadata addresses, no redirects, no environment proxies, unless
PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS is set. Endpoint headers hold no credentials: names that carry
secrets (Authorization, Cookie, anything with token/secret/key/password) are refused, because Prism
would have to keep them in plaintext to send them.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, repo
from prism.apps.integrations.endpoint_urls import (
    base_url_columns,
    call_url,
    call_url_columns,
    checked_base_url,
    real_base_url,
)
from prism.apps.integrations.models import CallLog, Endpoint
from prism.apps.integrations.params import (
    Call,
    CallLogList,
    EndpointAction,
    EndpointCreate,
    EndpointList,
    EndpointUpdate,
    HealthParams,
)
from prism.apps.states import move
from prism.config import Settings
from prism.errors import Conflict, InvalidArguments, NotFound
from prism.integrations.credentials import withheld
from prism.integrations.failures import without_credentials, without_url_secrets
from prism.integrations.upstream import unpassable_refusal
from prism.kit.header_values import sendable
from prism.kit.ids import new_id
from prism.kit.nul import without_nul
from prism.kit.outbound import OutboundClient, OutboundFailed, OutboundTimeout
from prism.kit.timeutil import utcnow
from prism.registry import AfterCommit, HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("integrations", description="Calls to external systems through configured HTTPS endpoints.",
                 examples=shipped_examples())

SECRET_HEADER = re.compile(r"authorization|cookie|token|secret|key|password|credential", re.I)
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}\Z")
MAX_RESPONSE = 1_000_000
EXCERPT = 1000
MAX_URL = 4096  # the call log's url column
ENDPOINT_TRANSITIONS = {"enabled": frozenset({"disabled"}), "disabled": frozenset({"enabled"})}



async def _prepare_endpoint(call: HandlerCall, values: dict[str, Any], row: Endpoint | None) -> dict[str, Any]:
    if values.get("base_url") is not None:  # checked by `checked_base_url`, before the transaction
        if row is None:
            values["id"] = new_id()  # the sealed URL is bound to its row
        values.update(base_url_columns(call.settings, row.id if row is not None else values["id"], call.prepared))
    for name, value in (values.get("headers") or {}).items():
        if not HEADER_NAME.match(name) or not sendable(value):
            raise InvalidArguments(f"headers: {name!r} is not a valid header", field="headers")
        if SECRET_HEADER.search(name):
            raise InvalidArguments(f"headers: {name!r} would carry a credential; Prism stores no secrets for "
                                   "integrations", field="headers")
    return values


crud(app, Entity(Endpoint, "endpoint", "integration endpoints", EndpointList, search=("name", "description",
                                                                                        "base_url"),
                 orderable=("name", "created_at", "last_called_at"), default_ordering="name", create=EndpointCreate,
                 update=EndpointUpdate, group_by=("status", "default_method"), prepare=_prepare_endpoint,
                 before_transaction=checked_base_url,
                 keywords=("connector", "external system", "api endpoint", "third-party service", "partner api")))
crud(app, Entity(CallLog, "call_log", "integration call logs", CallLogList, search=("url", "error"),
                 orderable=("created_at", "duration_ms", "status_code"), default_ordering="-created_at",
                 deletable=False, group_by=("endpoint_id", "ok", "status_code", "method"), sums=("duration_ms",),
                 keywords=("outbound call history", "integration errors", "request log")))


def _decode(content: bytes, content_type: str) -> Any:
    """The answer's body: its JSON when it is JSON the doors can pass on (not nested too deep), else its text."""
    if "json" in content_type:
        try:
            decoded = orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
        else:
            if unpassable_refusal(decoded, None) is None:
                return decoded
    return content.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class _Sent:
    """What came back from an endpoint (or why nothing did)."""

    url: str
    method: str
    request_bytes: int
    status_code: int | None
    content_type: str
    raw: bytes
    error: str
    duration_ms: int


def _send(settings: Settings, endpoint: Endpoint, method: str, path: str, query: dict[str, str],
          body: Any) -> AfterCommit[_Sent]:
    """Checked now, in the call's transaction; sent once its audit entry is committed (AfterCommit says why),
    under the serving app's outbound policy (`settings`: private networks, CA bundle)."""
    if endpoint.status != "enabled":
        raise Conflict(f"endpoint {endpoint.name} is disabled", code="invalid_transition")
    endpoint_id, timeout_seconds = endpoint.id, endpoint.timeout_seconds
    base_url = real_base_url(settings, endpoint)
    url = call_url(base_url, path, query)
    if len(url) > MAX_URL:  # refused before anything is sent: the call's log could not hold it
        raise InvalidArguments(f"query: the call's URL would be {len(url):,} characters long, over {MAX_URL:,}",
                               details={"field": "query"})
    try:
        content = orjson.dumps(body) if body is not None and method != "GET" else b""
    except orjson.JSONEncodeError:  # nested past what JSON encoders go (254 levels)
        raise InvalidArguments("body: nested too deeply to send as JSON (at most 254 levels)",
                               details={"field": "body"}) from None
    headers = {**endpoint.headers, "User-Agent": "Prism-Integration/1.0"}
    if content:
        headers["Content-Type"] = "application/json"

    async def send() -> _Sent:
        started = time.monotonic()
        status_code: int | None = None
        error, raw, content_type = "", b"", ""
        try:
            async with OutboundClient(allow_private_networks=settings.webhook_allow_private_networks,
                                      ca_bundle=settings.webhook_ca_bundle, max_connections=1) as client:
                answer = await client.send(method, url, headers=headers, body=content,
                                           timeout_seconds=float(timeout_seconds), read_at_most=MAX_RESPONSE)
            # The endpoint's key (`?api_key=...` in its base URL) is the endpoint's, not the caller's: an upstream
            # that echoes the URL must not hand it to whoever may call it.
            status_code, raw = answer.status, withheld(answer.body, urls=(base_url,))
            # Header bytes that are not UTF-8 come as surrogate escapes, which no JSON answer can carry.
            content_type = answer.headers.get("content-type", "").encode("utf-8", "surrogateescape").decode(
                "utf-8", "replace")
            if answer.truncated:
                error = f"response larger than {MAX_RESPONSE} bytes; truncated"
        except OutboundTimeout:
            error = f"no response within {timeout_seconds} s"
        except OutboundFailed as exc:
            error = str(exc)
        return _Sent(url, method, len(content), status_code, content_type, raw, error,
                     int((time.monotonic() - started) * 1000))

    return AfterCommit(send, partial(_record, endpoint_id))


async def _record(endpoint_id: str, call: HandlerCall, sent: _Sent) -> dict[str, Any]:
    ok = sent.status_code is not None and 200 <= sent.status_code < 300 and not sent.error
    # The URL's query values are withheld from what the log keeps: an error names the URL, an upstream may echo it.
    error = without_credentials(sent.error, urls=(sent.url,)) or (
        "" if ok or sent.status_code is None else f"HTTP {sent.status_code}")
    text = without_nul(sent.raw.decode("utf-8", errors="replace"))  # an upstream's text, kept in a text column
    log_id: str | None = None
    # Deleted while the request was out: the answer still reaches the caller, with nothing to log it under.
    try:
        endpoint: Endpoint | None = await repo(call, Endpoint, "endpoint").get(endpoint_id)
    except NotFound:
        endpoint = None
    if endpoint is not None:
        log_id = new_id()
        repo(call, CallLog, "call_log").add(
            id=log_id, endpoint_id=endpoint_id, method=sent.method,
            **call_url_columns(call.settings, log_id, sent.url),
            request_bytes=sent.request_bytes, status_code=sent.status_code, ok=ok, duration_ms=sent.duration_ms,
            error=error, response_excerpt=without_url_secrets(text, (sent.url,))[:EXCERPT],
            actor_email=call.auth.user_email)
        endpoint.last_called_at, endpoint.last_status_code = utcnow(), sent.status_code
        await call.session.flush()
    return {"call_log_id": log_id, "ok": ok, "status_code": sent.status_code, "duration_ms": sent.duration_ms,
            "error": error or None, "content_type": sent.content_type or None,
            "body": _decode(sent.raw, sent.content_type) if sent.raw else None}


@app.handler("integration_call", "endpoint", "call", params=Call, scope="execute",
             permission="integrations.change_endpoint", cost=5,
             description="Call a configured external HTTPS endpoint (method, path, query, JSON body) and return "
                         "its status and response; every call is logged.",
             keywords=("http request", "webhook out", "call external api", "invoke integration"))
async def call_endpoint(call: HandlerCall, p: Call) -> AfterCommit[_Sent]:
    endpoint: Endpoint = await repo(call, Endpoint, "endpoint").get(p.id)
    return _send(call.settings, endpoint, p.method or endpoint.default_method, p.path, p.query, p.body)


@app.handler("integration_call", "endpoint", "ping", params=EndpointAction, scope="execute",
             permission="integrations.change_endpoint",
             description="Check that an endpoint answers: a GET of its base URL, logged like any call.",
             keywords=("health check", "test connection"))
async def ping_endpoint(call: HandlerCall, p: EndpointAction) -> AfterCommit[_Sent]:
    endpoint: Endpoint = await repo(call, Endpoint, "endpoint").get(p.id)
    return _send(call.settings, endpoint, "GET", "", {}, None)


@app.handler("workflow_action", "endpoint", "disable", params=EndpointAction, scope="execute",
             destructive=True,
             description="Disable an endpoint: calls to it are refused until it is enabled.",
             keywords=("turn off integration",))
async def disable_endpoint(call: HandlerCall, p: EndpointAction) -> dict[str, Any]:
    endpoint: Endpoint = await repo(call, Endpoint, "endpoint").get(p.id)
    move(endpoint, "disabled", ENDPOINT_TRANSITIONS, "endpoint")
    await call.session.flush()
    return to_record(endpoint)


@app.handler("workflow_action", "endpoint", "enable", params=EndpointAction, scope="execute",
             description="Enable a disabled endpoint.", keywords=("turn on integration",))
async def enable_endpoint(call: HandlerCall, p: EndpointAction) -> dict[str, Any]:
    endpoint: Endpoint = await repo(call, Endpoint, "endpoint").get(p.id)
    move(endpoint, "enabled", ENDPOINT_TRANSITIONS, "endpoint")
    await call.session.flush()
    return to_record(endpoint)


@app.handler("report_query", "endpoint", "health", params=HealthParams, scope="read",
             permission="integrations.view_endpoint",
             description="Health of each endpoint from its call log: calls, success rate, median and 95th "
                         "percentile latency, last error.", keywords=("integration uptime", "latency", "failing api"))
async def endpoint_health(call: HandlerCall, p: HealthParams) -> dict[str, Any]:
    endpoints = (await call.session.execute(repo(call, Endpoint, "endpoint").base().order_by(Endpoint.name)))
    stmt = repo(call, CallLog, "call_log").base()
    if p.since:
        stmt = stmt.where(CallLog.created_at > p.since)
    logs: dict[str, list[CallLog]] = {}
    for log in (await call.session.execute(stmt.order_by(CallLog.created_at, CallLog.id))).scalars():
        logs.setdefault(log.endpoint_id, []).append(log)
    report = []
    for endpoint in endpoints.scalars():
        calls = logs.get(endpoint.id, [])
        durations = sorted(c.duration_ms for c in calls)
        failures = [c for c in calls if not c.ok]
        report.append({
            "endpoint_id": endpoint.id, "name": endpoint.name, "status": endpoint.status, "calls": len(calls),
            "success_rate": round((len(calls) - len(failures)) / len(calls), 4) if calls else None,
            "p50_ms": _percentile(durations, 0.5), "p95_ms": _percentile(durations, 0.95),
            "last_error": failures[-1].error if failures else None})
    return {"endpoints": report}


def _percentile(values: list[int], q: float) -> int | None:
    """Nearest-rank percentile of sorted values."""
    if not values:
        return None
    return values[max(0, math.ceil(q * len(values)) - 1)]


# config_manage/integrations/...: imported OpenAPI services and connections to them (registered on `app`).
from prism.apps.integrations import imports  # noqa: E402, F401
