"""Upstream MCP servers: their tools as handlers `integration_call/<app>/tool/<name>`, calls forwarded with the
official `mcp` client (streamable HTTP, or the legacy HTTP+SSE transport). Needs the `federation` extra.

The tool list is read when the integration is added (or refreshed) and stored like an OpenAPI import's
operations, so building the registry never waits for an upstream: one that is down costs only its own calls
(502/504). A `notifications/tools/list_changed` the upstream sends during a forwarded call makes Prism read
the list again in that session and store it, for an integration the caller's organization owns and reaches at
the URL it was added from; every process then rebuilds within PRISM_INTEGRATIONS_REFRESH_SECONDS. Otherwise,
or when the list is past the limits, the stored list keeps serving and the integration is marked `stale` with
the reason (`follow_tool_list`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import orjson

from prism.config import Settings
from prism.errors import InvalidArguments, PrismError
from prism.integrations import mcp_sessions
from prism.integrations.call_records import Connection, connection_for, keep_record
from prism.integrations.credentials import Credential, open_secret, withheld
from prism.integrations.failures import Failure, failure_of, kept_text
from prism.integrations.mcp_limits import MAX_TOOL_PAGES, TOOL_DESCRIPTION_CHARS, ToolListBudget, past_limits
from prism.integrations.models import IntegrationApp
from prism.integrations.names import operation_name
from prism.integrations.shown_urls import address_only
from prism.integrations.upstream import (
    EXCERPT,
    MAX_RESPONSE,
    USER_AGENT,
    forget_token,
    issued_token,
    unpassable_refusal,
)
from prism.integrations.upstream_error import UpstreamError
from prism.kit.canonical import digest
from prism.kit.outbound import OutboundClient, check_url, ssl_context
from prism.kit.timeutil import utcnow
from prism.ratelimit.headers import over_limit
from prism.ratelimit.limiter import INTEGRATION_CHANGES
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked
from prism.registry import AfterCommit, HandlerCall

log = logging.getLogger("prism.integrations")

TRANSPORTS = ("streamable_http", "sse")
# The largest event of an event stream the MCP client reads (an answer, a page of the tool list): its own default,
# which its legacy SSE transport applies too, set here so that it stays Prism's decision.
MAX_EVENT_BYTES = 1024 * 1024


@asynccontextmanager
async def session(settings: Settings, url: str, transport: str, credential: Credential, timeout_seconds: float,
                  connection_id: str = "", on_list_changed: Any = None,
                  on_session_lost: Callable[[], None] | None = None) -> AsyncIterator[Any]:
    """An initialised `mcp.Client` to the upstream; the URL is checked by the outbound rules first.
    `on_session_lost` is told when the upstream refuses a tool call at the session's level (`_refused_call`)."""
    try:
        import httpx2
        from mcp import Client
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        from prism.kit.outbound_httpx import guarded_transport
    except ImportError:
        raise PrismError("upstream MCP servers need the official MCP client: pip install 'prism[federation]'",
                         code="federation_not_installed", status=501) from None

    from prism.integrations.upstream import _oauth_token

    await check_url(url, field="base_url", allow_private_networks=settings.webhook_allow_private_networks)
    bearer = None
    if credential.kind == "oauth2_client_credentials":
        # Checked when it was saved, and again before the client's credentials go there: the CLI's add-mcp and
        # refresh take a token URL that was never saved, and the outbound rules may have changed since.
        await check_url(credential.settings["token_url"], field="token_url",
                        allow_private_networks=settings.webhook_allow_private_networks)
        async with OutboundClient(allow_private_networks=settings.webhook_allow_private_networks,
                                  ca_bundle=settings.webhook_ca_bundle, max_connections=1) as outbound:
            bearer = await _oauth_token(outbound, connection_id, credential, timeout_seconds)
    headers = {"User-Agent": USER_AGENT, **credential.headers(bearer)}

    async def handler(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed" and on_list_changed is not None:
            on_list_changed()

    def guarded() -> Any:  # every connection the client makes is vetted by the outbound rules
        return guarded_transport(allow_private_networks=settings.webhook_allow_private_networks,
                                 ssl_context=ssl_context(settings.webhook_ca_bundle), max_answer_bytes=MAX_RESPONSE)

    if transport == "sse":
        def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
            return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, trust_env=False,
                                      transport=guarded())

        async with Client(sse_client(url, headers=headers, timeout=timeout_seconds, httpx_client_factory=factory),
                          mode="legacy", read_timeout_seconds=timeout_seconds, message_handler=handler) as client:
            yield client
        return
    async def refused(response: Any) -> None:
        if on_session_lost is not None and _refused_call(response):
            on_session_lost()

    async with httpx2.AsyncClient(headers=headers, timeout=timeout_seconds, trust_env=False,
                                  transport=guarded(), event_hooks={"response": [refused]}) as http:
        async with Client(streamable_http_client(url, http_client=http, max_sse_event_size=MAX_EVENT_BYTES),
                          mode="legacy",
                          read_timeout_seconds=timeout_seconds, message_handler=handler) as client:
            yield client


def _refused_call(response: Any) -> bool:
    """Whether the upstream refused a tool call at the session's level, before any tool ran: HTTP 404 to a request
    naming a session (MCP: the server does not know it, as after a restart), 401 or 403 (the credential, or the
    token it was exchanged for, is no longer accepted). The MCP client reports these as JSON-RPC errors, like a
    tool's own, so they are told apart here, on the HTTP answer."""
    request, status = response.request, response.status_code
    unknown_session = status == 404 and "mcp-session-id" in request.headers
    if request.method != "POST" or not (status in (401, 403) or unknown_session):
        return False
    import httpx2

    try:
        message = orjson.loads(request.content)
    except (httpx2.RequestNotRead, orjson.JSONDecodeError):
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"


async def list_tools(client: Any) -> list[dict[str, Any]]:
    """Every page of the upstream's tool list, read no further than the limits (prism.integrations.mcp_limits):
    an upstream that pages without end, or lists more (or larger) tools than any registry should hold, must not
    fill Prism's memory until the time limit, nor its storage, descriptors and search afterwards."""
    tools: list[dict[str, Any]] = []
    budget = ToolListBudget()
    cursor = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        read = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
        budget.take(read)
        tools += read
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise past_limits(f"more than {MAX_TOOL_PAGES} pages")


def operations_of(tools: list[dict[str, Any]], transport: str, default_cost: int = 1) -> list[dict[str, Any]]:
    """Each tool as a stored operation: entity `tool`, its name in lowerCamelCase (clashes numbered in order)."""
    operations: list[dict[str, Any]] = []
    taken: set[str] = set()
    for tool in sorted(tools, key=lambda t: str(t.get("name"))):
        name = str(tool.get("name") or "")
        if not name:
            continue
        operation = operation_name(name, "post", "", [])
        if operation in taken:
            base, n = operation[:60], 2
            while f"{base}{n}" in taken:
                n += 1
            operation = f"{base}{n}"
        taken.add(operation)
        annotations = tool.get("annotations") or {}
        read_only = annotations.get("readOnlyHint") is True
        # MCP's default: a tool that is not read-only may be destructive unless it says otherwise.
        destructive = not read_only and annotations.get("destructiveHint") is not False
        given = tool.get("inputSchema")
        schema: dict[str, Any] = {**(given if isinstance(given, dict) else {}), "type": "object"}
        schema.setdefault("properties", {})
        verb = "view" if read_only else "delete" if destructive else "change"
        operations.append({
            "entity": "tool", "operation": operation, "method": "MCP", "path": "", "tool_name": name,
            "transport": transport, "tag": "", "operation_id": name,
            "description": (str(tool.get("description") or tool.get("title") or name))[:TOOL_DESCRIPTION_CHARS],
            "parameters": [], "body": None, "schema": schema, "read_only": read_only, "destructive": destructive,
            "cost": default_cost, "permission_verb": verb,
        })
    return operations


@dataclass(slots=True)
class Forwarded:
    result: dict[str, Any] | None = None
    error: str = ""
    timed_out: bool = False
    upstream_error: str = ""  # a JSON-RPC error the upstream answered
    duration_ms: int = 0
    tools_changed: bool = False  # the upstream sent notifications/tools/list_changed since the last call
    tools: list[dict[str, Any]] | None = None  # then read again, when the list is followed
    tools_failure: Failure | None = None  # why it could not be (past the limits, unreadable)


async def forward(settings: Settings, url: str, transport: str, credential: Credential, timeout_seconds: float,
                  connection_id: str, tool_name: str, arguments: dict[str, Any], *,
                  follow_list_changes: bool) -> Forwarded:
    """One call through the kept-open session to this upstream (prism.integrations.mcp_sessions); a tool list
    the upstream says changed is read again when `follow_list_changes`."""
    from mcp import MCPError

    outcome = Forwarded()
    started = time.monotonic()

    def failure(exc: BaseException) -> Failure:
        return failure_of(exc, urls=(url,), credential=credential, bearer=issued_token(connection_id, credential))

    key = mcp_sessions.key_of(settings, url, transport, connection_id, credential)
    opener = partial(_open, settings, url, transport, credential, timeout_seconds, connection_id)
    held = mcp_sessions.pooled(key, opener)
    broken = True
    try:
        async with asyncio.timeout(timeout_seconds):
            for attempt in (1, 2):
                client = await held.ready()
                try:
                    with held.calling() as mine:
                        result = await client.call_tool(tool_name, arguments)
                    break
                except MCPError:
                    if attempt == 2 or not (held.lost and mine.alone):
                        raise
                    # Sent again, once, on a new session. Safe: the upstream refused this very call (no other went
                    # through the session meanwhile) at the session's level, 404 for a session it forgot or 401/403
                    # for a credential it no longer takes, which a server answers before it runs any tool.
                    await _discard(key, held, connection_id, credential)
                    held = mcp_sessions.pooled(key, opener)
            outcome.result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            broken = False
            if held.changed:
                held.changed, outcome.tools_changed = False, True
                if follow_list_changes:
                    broken = True  # until the list is read
                    outcome.tools, outcome.tools_failure, broken = await _listed_again(client, failure)
    except TimeoutError:
        late = TimeoutError(f"no answer within {timeout_seconds:g} s")
        if outcome.result is not None:  # the call went through; the list announced with it did not come in time
            outcome.tools_failure = failure(late)
        else:
            outcome.timed_out, outcome.error = True, str(late)
    except MCPError as exc:  # the upstream answered: the session is fine, unless it refused it (`_refused_call`)
        outcome.upstream_error, broken = failure(exc).detail, held.lost
    except PrismError as exc:  # the outbound rules refused the URL, or the client is not installed
        outcome.error = failure(exc).detail
    except Exception as exc:  # transports raise many kinds (and groups of them): all mean "not reached"...
        cause = _innermost(exc)
        if isinstance(cause, MCPError):  # ...but an answered opening (a refused credential: its 401) is an answer
            outcome.upstream_error = failure(cause).detail
        else:
            outcome.error = failure(exc).detail
    if broken:
        await _discard(key, held, connection_id, credential)
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    return outcome


async def _discard(key: mcp_sessions.Key, held: mcp_sessions.PooledSession, connection_id: str,
                   credential: Credential) -> None:
    """The next call opens a new session; after a refusal at the session's level (`_refused_call`), with a new
    OAuth access token too: a 401 may mean the upstream no longer takes the one this process holds."""
    if held.lost:
        forget_token(connection_id, credential)
    await mcp_sessions.discard(key, held)


async def _listed_again(client: Any, failure: Callable[[BaseException], Failure]
                        ) -> tuple[list[dict[str, Any]] | None, Failure | None, bool]:
    """The tool list read again after the upstream said it changed: (the tools, or why not; whether the session
    broke). The call it came with went through whatever happens here."""
    from mcp import MCPError

    try:
        return await list_tools(client), None, False
    except (PrismError, MCPError) as exc:  # past the limits, or the upstream answered an error: the session is fine
        return None, failure(exc), False
    except Exception as exc:  # see forward()
        return None, failure(exc), True


def _open(settings: Settings, url: str, transport: str, credential: Credential, timeout_seconds: float,
          connection_id: str, on_list_changed: Callable[[], None], on_session_lost: Callable[[], None]) -> Any:
    return session(settings, url, transport, credential, timeout_seconds, connection_id,
                   on_list_changed=on_list_changed, on_session_lost=on_session_lost)


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def call_tool_operation(operation: dict[str, Any], call: HandlerCall, params: Any) -> AfterCommit[Forwarded]:
    """The handler of every upstream MCP tool (bound to its operation with functools.partial)."""
    assert call.handler.integration is not None
    connection = await connection_for(call, call.handler.integration)
    arguments = params.model_dump()
    credential = Credential(connection.auth_kind, dict(connection.auth_settings),
                            open_secret(call.settings, connection.id, connection.secret_encrypted))
    settings, url, timeout = call.settings, connection.base_url, float(connection.timeout_seconds)
    connection_id, app_id = connection.id, connection.integration_id
    follows = _follows_list_changes(connection, call.organization_id)
    arguments_digest = digest(arguments)

    async def go() -> Forwarded:
        return await forward(settings, url, operation["transport"], credential, timeout, connection_id,
                             operation["tool_name"], arguments, follow_list_changes=follows)

    async def record(done: HandlerCall, sent: Forwarded) -> Any:
        if sent.tools_changed:
            await follow_tool_list(done, app_id, sent, operation["transport"])
        sent = passed_on(sent, credential, issued_token(connection_id, credential), url)
        return await record_forwarded(done, operation["tool_name"], arguments_digest, sent)

    return AfterCommit(go, record)


def passed_on(sent: Forwarded, credential: Credential, bearer: str | None, url: str) -> Forwarded:
    """What the upstream answered, with the connection's credential and the keys written into its `url` withheld
    wherever it echoed them."""
    def clean(text: str) -> str:
        return withheld(text.encode(), credential=credential, bearer=bearer, urls=(url,)).decode()

    result = sent.result
    if result is not None:
        try:
            result = orjson.loads(withheld(orjson.dumps(result), credential=credential, bearer=bearer, urls=(url,)))
        except orjson.JSONEncodeError:
            pass  # not JSON Prism can write: refused as unpassable without showing any of it
    return replace(sent, result=result, error=clean(sent.error), upstream_error=clean(sent.upstream_error))


def _follows_list_changes(connection: Connection, organization_id: str) -> bool:
    """Whether a tool list announced through this organization's session may replace the stored one: only for an
    integration the organization owns, reached at the URL it was added from. An upstream may list different tools
    to different credentials, so one organization's list must never become another's: a deployment's integration
    is read with the operator's credential only (`prism integration add-mcp`, `refresh`)."""
    return (connection.owner_organization_id == organization_id
            and connection.base_url.rstrip("/") == (connection.default_server or "").rstrip("/"))


async def follow_tool_list(call: HandlerCall, app_id: str, sent: Forwarded, transport: str) -> None:
    """After the upstream announced a changed tool list: store the list read again, or keep serving the stored
    one and say why on the integration (status `stale`, `last_error`), and in the log."""
    from prism.integrations.runtime import bump_generation
    from prism.integrations.service import locked_app, over_handler_limit

    app = await locked_app(call.session, app_id)
    if app is None:
        return
    refusal = None
    if sent.tools is not None:
        operations = operations_of(sent.tools, transport, _cost_of(app))
        if app.owner_organization_id is not None:  # as adding it again would be
            refusal = await over_handler_limit(call.session, call.settings, app.owner_organization_id, app,
                                               len(operations))
        if refusal is None and operations != app.operations:
            refusal = await _over_change_limit(call, app)
        if refusal is None:
            app.status = "ok"
            if operations != app.operations:
                app.operations, app.revision = operations, app.revision + 1
                await bump_generation(call.session)
            return
    if refusal is not None:
        reason = (f"the tool list the upstream announced was not stored: {refusal.message}; revision {app.revision} "
                  "still serves")
    elif sent.tools_failure is not None:
        why = kept_text(sent.tools_failure, owner_organization_id=app.owner_organization_id)
        reason = f"the tool list the upstream announced was not stored: {why}; revision {app.revision} still serves"
    elif app.owner_organization_id is None:
        reason = ("the upstream announced a changed tool list; the deployment's list is read with the operator's "
                  f"credential only: prism integration refresh {app.name}")
    else:
        reason = ("the upstream announced a changed tool list through a connection to another URL than the one the "
                  "integration was added from; add it again to read it")
    app.status, app.last_error, app.last_error_at = "stale", reason[:1000], utcnow()
    log.warning("integration %s is stale (announced through organization %s): %s", app.name, call.organization_id,
                reason)


async def _over_change_limit(call: HandlerCall, app: IntegrationApp) -> PrismError | None:
    """A list change followed is a change of the organization's integrations, counted in its window as an import
    is (PRISM_RATE_LIMIT_INTEGRATION_CHANGES): each makes every process rebuild its registry, and an upstream that
    announced a new list with every answer would otherwise have them rebuild at the rate its tools are called."""
    limiter, owner = call.limiter, app.owner_organization_id
    if limiter is None or owner is None:  # the deployment's own lists are read by its operator only
        return None
    try:
        verdict = await limiter.hit(INTEGRATION_CHANGES, owner)
    except LimiterUnavailable as exc:  # as the dispatcher counts a handler's limit
        return exc if limiter.fails_closed else None
    if isinstance(verdict, Locked) or verdict.allowed:
        return None
    return over_limit(verdict, f"the organization changed its integrations {verdict.limit} times in the last "
                               f"minute, its limit; the next change announced after {verdict.retry_after} s is read")


def _cost_of(app: IntegrationApp) -> int:
    return int(app.operations[0]["cost"]) if app.operations else 1


async def record_forwarded(call: HandlerCall, tool_name: str, arguments_digest: str, sent: Forwarded) -> Any:
    refusal: UpstreamError | None = None
    if sent.timed_out:
        refusal = UpstreamError(f"the upstream MCP server did not answer in time ({sent.error})",
                                code="upstream_timeout", status=504, details={"upstream_status": None})
    elif sent.upstream_error:
        refusal = UpstreamError(f"the upstream MCP server refused the call: {sent.upstream_error}",
                                code="upstream_error", status=502, details={"upstream_status": None})
    elif sent.result is None:
        refusal = UpstreamError(f"the upstream MCP server could not be reached: {sent.error}",
                                code="upstream_unreachable", status=502, details={"upstream_status": None})
    elif sent.result.get("isError"):
        text = " ".join(str(c.get("text", "")) for c in sent.result.get("content", []) if isinstance(c, dict))
        refusal = UpstreamError(f"the upstream tool {tool_name} failed", code="upstream_error", status=502,
                                details={"upstream_status": None, "upstream_body": text[:EXCERPT]})
    else:
        refusal = unpassable_refusal(sent.result, None)
    # A call that went through keeps in its record why the tool list it announced was not read again (if so).
    await keep_record(call, method="MCP", path=tool_name, arguments_digest=arguments_digest, upstream_status=None,
                      outcome="ok" if refusal is None else refusal.code, attempts=1, duration_ms=sent.duration_ms,
                      error=refusal.message if refusal is not None else
                      sent.tools_failure.detail if sent.tools_failure is not None else "")
    if refusal is not None:
        return refusal
    assert sent.result is not None
    return {"content": sent.result.get("content", []), "structuredContent": sent.result.get("structuredContent")}


async def read_tools(settings: Settings, url: str, transport: str, credential: Credential,
                     timeout_seconds: float = 30.0) -> list[dict[str, Any]]:
    """The upstream's tools now (adding or refreshing an integration); UpstreamError when it cannot be read."""
    if transport not in TRANSPORTS:
        raise InvalidArguments(f"transport: one of {', '.join(TRANSPORTS)}", details={"field": "transport"})
    try:
        async with asyncio.timeout(timeout_seconds), session(settings, url, transport, credential,
                                                             timeout_seconds) as client:
            return await list_tools(client)
    except TimeoutError:
        raise UpstreamError(f"the MCP server at {address_only(url)} did not answer in time",
                            code="upstream_timeout", status=504) from None
    except PrismError:
        raise
    except Exception as exc:  # see forward()
        import httpx2  # importable: the session opened
        from mcp import MCPError

        cause = _innermost(exc)
        if isinstance(cause, PrismError):  # raised inside the session: its task group wrapped it
            raise cause from None
        # Its text may name the URL with its query string, or echo the credential: shown without them.
        detail = failure_of(cause, urls=(url,), credential=credential).detail
        # Reached: it answered an error (a refused credential included, whether as a JSON-RPC error or as the
        # legacy SSE transport's HTTP status), or an answer past the limits (an event of the legacy SSE stream
        # raises as it is), as a call's answer would be (forward).
        if isinstance(cause, MCPError | httpx2.SSEError | httpx2.HTTPStatusError):
            status = cause.response.status_code if isinstance(cause, httpx2.HTTPStatusError) else None
            raise UpstreamError(f"the MCP server at {address_only(url)} answered with an error: {detail}",
                                code="upstream_error", status=502, details={"upstream_status": status}) from None
        raise UpstreamError(f"the MCP server at {address_only(url)} could not be reached: {detail}",
                            code="upstream_unreachable", status=502) from None
