"""The MCP door at /api/mcp/sse: streamable HTTP (2026-07-28 without sessions; 2025-11-25, 2025-06-18 and
2025-03-26 after `initialize`) and legacy HTTP+SSE (2024-11-05) on one path (revisions.py).

    POST                      JSON-RPC message, or batch where the revision has them (streamable HTTP);
                              `?session_id=` → legacy SSE message; `?tools=` picks the tool surface (surfaces.py),
                              over the key's own option, over PRISM_MCP_TOOL_SURFACE
    GET                       legacy SSE stream (a GET naming a session or protocol version is refused: 405)
    OPTIONS                   CORS preflight, no authentication
    DELETE, any other         405 (Allow: GET, POST, OPTIONS) — sessions are signed tokens, nothing server-side
                              to end (docs/mcp.md)

The edge (prism.edge) has authenticated the caller and counted the request; every answer carries X-RateLimit-*
of the window it was counted in (the tenant's, or the address's before the caller is known), and refusals take
the JSON-RPC shape of prism.mcp_server.refusals; a 401 names the protected-resource metadata, and so does the
403 that asks an OAuth client to step up its scopes (tools.ScopeChallenge).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.routing import BaseRoute

from prism.auth.context import AuthContext
from prism.edge.context import request_context
from prism.edge.doors import door_routes
from prism.errors import PrismError, Unauthenticated
from prism.kit.secret import derived_key
from prism.mcp_server import jsonrpc, modern, protocol, revisions, tools
from prism.mcp_server.http import (
    ALLOWED_METHODS,
    Receive,
    Scope,
    Send,
    accepts,
    cors_headers,
    preflight,
    read_body,
    respond,
    respond_json,
    respond_sse,
)
from prism.mcp_server.jsonrpc import RpcError
from prism.mcp_server.legacy_sse import LegacyStreams, serve_stream
from prism.mcp_server.refusals import JSON_RPC, PATH, rate_headers
from prism.mcp_server.sessions import SessionSigner
from prism.mcp_server.surfaces import SURFACES
from prism.oauth.challenge import insufficient_scope_challenge
from prism.ratelimit.headers import over_limit
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Verdict

DISCOVER = "server/discover"


class McpDoor:
    """A plain ASGI app (Starlette mounts it as is): the whole protocol, no per-request framework objects."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        context = request_context(scope)
        headers = context.headers
        origin = headers.get("origin")
        method = scope["method"]
        extra = [*cors_headers(origin), *_encode(rate_headers(scope))]
        if method == "OPTIONS":  # the preflight: answered before any caller is known
            await preflight(send, extra)
            return
        if method not in ("GET", "POST"):
            await _method_not_allowed(send, extra)
            return
        if context.auth is None:
            error = context.auth_error or Unauthenticated("Authorization: Bearer <key> is required",
                                                          code="authentication_required")
            await JSON_RPC.refuse(scope, receive, send, error)
            return
        auth = context.auth
        raw_query = scope.get("query_string", b"")
        # Blank values kept: `?tools=` names a surface (none), it is not the parameter left out.
        query = parse_qs(raw_query.decode("latin-1"), keep_blank_values=True) if raw_query else {}
        # The URL's ?tools= first, then the credential's own option, then the deployment's setting.
        surface = query.get("tools", [auth.tool_surface or scope["app"].state.settings.mcp_tool_surface])[0]
        if surface not in SURFACES:
            refusal = RpcError(jsonrpc.INVALID_REQUEST, f"tools: {surface!r} is not a tool surface; one of "
                               f"{', '.join(SURFACES)}", data={"error": "invalid_tool_surface"})
            await respond_json(send, 400, refusal.body(None), extra)
            return
        scope["prism.mcp_surface"] = surface
        if method == "GET":
            await self._get(scope, receive, send, headers, auth, extra)
        elif "session_id" in query:
            await self._legacy_post(scope, receive, send, headers, auth, extra, query["session_id"][0])
        else:
            await self._post(scope, receive, send, headers, auth, extra)

    async def _post(self, scope: Scope, receive: Receive, send: Send, headers: Headers, auth: AuthContext,
                    extra: list[tuple[bytes, bytes]]) -> None:
        state = scope["app"].state
        want_json, want_sse = accepts(headers.get("accept"))
        try:
            _check_content_type(headers)
            if not (want_json or want_sse):
                raise _status(406, RpcError(jsonrpc.INVALID_REQUEST, "Accept must allow application/json or "
                                            "text/event-stream", data={"error": "not_acceptable"}))
            messages, batch = jsonrpc.parse_body(await read_body(receive, headers.get("content-length")))
            requested = headers.get("mcp-protocol-version")
            methods = [m.method for m in messages if isinstance(m, jsonrpc.Message)]
            # A request is of the per-request revision by its header, by `server/discover`, or by the envelope it
            # carries (a dual-era server serves such a request statelessly, and checks the envelope against the
            # header: a missing or different header is a HeaderMismatch naming the request's id).
            if requested in revisions.MODERN or DISCOVER in methods or any(map(modern.carries_envelope, messages)):
                await _modern(scope, send, headers, want_json, extra, _context(scope, auth, requested or ""),
                              messages, batch)
                return
            if requested is not None and requested not in revisions.HANDSHAKE:
                refusal = modern.unsupported(requested)
                refusal.request_id = jsonrpc.sole_request_id(messages)
                raise refusal
            if "initialize" in methods:
                if batch:
                    raise _status(400, RpcError(jsonrpc.INVALID_REQUEST, "initialize must not be part of a batch",
                                                data={"error": "invalid_body"},
                                                request_id=jsonrpc.sole_request_id(messages)))
                message = messages[0]
                assert isinstance(message, jsonrpc.Message)
                if not message.is_request:  # a notification is never answered, and the session comes in the answer
                    raise _status(400, RpcError(jsonrpc.INVALID_REQUEST, "initialize must be a request (with an id)",
                                                data={"error": "invalid_body"}))
                version = protocol.negotiate(message.params)
                session = _signer(state).issue(auth, version)
                answer = jsonrpc.result(message.id, protocol.initialize_result(version))
                await _answer(send, [answer], False, want_json, [*extra, (b"mcp-session-id", session.encode())])
                return
            session_id = headers.get("mcp-session-id")
            if session_id is None:
                raise _status(400, RpcError(jsonrpc.SESSION_REQUIRED, "Bad Request: Mcp-Session-Id header is "
                                            "required; send initialize first", data={"error": "session_required"},
                                            request_id=jsonrpc.sole_request_id(messages)))
            verified = _signer(state).verify(session_id, auth)
            if verified is None:
                raise _status(404, RpcError(jsonrpc.SESSION_NOT_FOUND, "Session not found: it expired or belongs to "
                                            "another user or client; initialize again",
                                            data={"error": "session_not_found"},
                                            request_id=jsonrpc.sole_request_id(messages)))
            version = verified
            if batch and not revisions.allows_batches(version):
                raise _status(400, RpcError(jsonrpc.INVALID_REQUEST, f"JSON-RPC batches are not part of MCP "
                                            f"{version}: send one message per request",
                                            data={"error": "batch_not_supported"},
                                            request_id=jsonrpc.sole_request_id(messages)))
        except _HttpError as exc:  # the id of the request it refuses, when it was read (else none was)
            await respond_json(send, exc.status, exc.error.body(exc.error.request_id), extra)
            return
        except RpcError as exc:
            await respond_json(send, 413 if exc.code == jsonrpc.PAYLOAD_TOO_LARGE else 400, exc.body(exc.request_id),
                               extra)
            return
        # Counted once the batch is one its session may send (a batch refused whole, for its session or its revision,
        # runs nothing and spends no more than the HTTP request the edge counted).
        over_limit_refusal = await _charge_batch(scope, auth, messages)
        if over_limit_refusal is not None:
            await JSON_RPC.refuse(scope, receive, send, over_limit_refusal)
            return
        extra = _rate_updated(extra, scope)
        try:  # a batch shares one HTTP answer: only a request alone can be refused with its own 403
            answers = await _answer_all(replace(_context(scope, auth, version), step_up=not batch), messages)
        except tools.ScopeChallenge as challenge:
            await _refuse_for_scope(scope, send, challenge, jsonrpc.sole_request_id(messages), extra)
            return
        if not answers:
            if all(isinstance(m, RpcError) for m in messages):  # nothing of it accepted: refused as one message is
                refused = next(m for m in messages if isinstance(m, RpcError))
                await respond_json(send, 400, refused.body(None), extra)
                return
            await respond(send, 202, b"", extra)
            return
        await _answer(send, answers, batch, want_json, extra)

    async def _get(self, scope: Scope, receive: Receive, send: Send, headers: Headers, auth: AuthContext,
                   extra: list[tuple[bytes, bytes]]) -> None:
        if headers.get("mcp-session-id") is not None or headers.get("mcp-protocol-version") is not None:
            # A streamable-HTTP client asking for a server-to-client stream: Prism never sends requests or
            # notifications of its own, and the specification's answer for that is 405.
            await _method_not_allowed(send, extra)
            return
        state = scope["app"].state
        streams = _streams(state)
        stream = await streams.open(auth)
        endpoint = f"{scope['path']}?session_id={stream.id}"  # the path as the client sent it, root path included
        if b"tools=" in scope.get("query_string", b""):  # the stream's messages keep the surface it chose
            endpoint += f"&tools={scope['prism.mcp_surface']}"
        await serve_stream(streams, stream, endpoint, receive, send, extra,
                           keepalive=state.settings.mcp_sse_keepalive_seconds)

    async def _legacy_post(self, scope: Scope, receive: Receive, send: Send, headers: Headers, auth: AuthContext,
                           extra: list[tuple[bytes, bytes]], stream_id: str) -> None:
        state = scope["app"].state
        streams = _streams(state)
        try:
            if not await streams.is_open_for(stream_id, auth):
                raise _status(404, RpcError(jsonrpc.SESSION_NOT_FOUND, "Session not found: the stream is closed "
                                            "or was opened by another credential",
                                            data={"error": "session_not_found"}))
            _check_content_type(headers)
            messages, _ = jsonrpc.parse_body(await read_body(receive, headers.get("content-length")))
            over_limit_refusal = await _charge_batch(scope, auth, messages)
            if over_limit_refusal is not None:
                await JSON_RPC.refuse(scope, receive, send, over_limit_refusal)
                return
            extra = _rate_updated(extra, scope)
        except _HttpError as exc:
            await respond_json(send, exc.status, exc.error.body(None), extra)
            return
        except RpcError as exc:
            if exc.request_id is not None and not exc.of_notification:
                # A request refused for what it holds: answered where its client waits, as every answer on this
                # transport is; only a body that could not be read at all is refused on the POST.
                await respond(send, 202, b"Accepted", extra, content_type=b"text/plain")
                await streams.send(stream_id, [exc.body(exc.request_id)])
                return
            await respond_json(send, 413 if exc.code == jsonrpc.PAYLOAD_TOO_LARGE else 400, exc.body(exc.request_id),
                               extra)
            return
        await respond(send, 202, b"Accepted", extra, content_type=b"text/plain")
        # The transport is 2024-11-05's (streamable HTTP replaced it), and a stream speaks that revision only: its
        # `initialize` answers it, and every answer takes its shapes (its clients reject later additions, such as
        # `resource_link` content). Nothing of the handshake needs keeping across the processes a stream's POSTs
        # land on.
        await streams.send(stream_id, await _answer_all(_context(scope, auth, revisions.LEGACY_SSE), messages))


class _HttpError(Exception):
    def __init__(self, status: int, error: RpcError) -> None:
        self.status = status
        self.error = error


def _status(status: int, error: RpcError) -> _HttpError:
    return _HttpError(status, error)


def _check_content_type(headers: Headers) -> None:
    content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise _status(415, RpcError(jsonrpc.INVALID_REQUEST, "Content-Type must be application/json",
                                    data={"error": "unsupported_media_type"}))


async def _answer_all(ctx: protocol.Context, messages: list[jsonrpc.Message | RpcError]) -> list[dict[str, Any]]:
    answers = []
    for message in messages:
        if isinstance(message, RpcError) and message.of_notification:
            continue
        answer = (message.body(message.request_id) if isinstance(message, RpcError)
                  else await protocol.answer(ctx, message))
        if answer is not None:
            answers.append(answer)
    return answers


async def _answer(send: Send, answers: list[dict[str, Any]], batch: bool, want_json: bool,
                  headers: list[tuple[bytes, bytes]]) -> None:
    if want_json:
        await respond_json(send, 200, answers if batch else answers[0], headers)
    else:
        await respond_sse(send, answers, headers)


async def _method_not_allowed(send: Send, extra: list[tuple[bytes, bytes]]) -> None:
    body = RpcError(jsonrpc.INVALID_REQUEST, "Method not allowed: POST messages; GET opens a legacy SSE stream "
                    "(without session headers); sessions end by themselves", data={"error": "method_not_allowed"})
    await respond_json(send, 405, body.body(None), [*extra, (b"allow", ALLOWED_METHODS.encode())])


def _signer(state: Any) -> SessionSigner:
    signer: SessionSigner | None = getattr(state, "mcp_sessions", None)
    if signer is None:
        settings = state.settings
        signer = SessionSigner(derived_key(settings, "mcp-session"), ttl_seconds=settings.mcp_session_ttl_seconds)
        state.mcp_sessions = signer
    return signer


def _streams(state: Any) -> LegacyStreams:
    streams: LegacyStreams | None = getattr(state, "mcp_streams", None)
    if streams is None:
        streams = state.mcp_streams = LegacyStreams(state.settings, state.db)
    return streams


def _context(scope: Scope, auth: AuthContext, version: str) -> protocol.Context:
    state = scope["app"].state
    return protocol.Context(auth, state.dispatcher, state.registry, state.settings.mcp_tools_page_size, version,
                            scope["prism.mcp_surface"])


async def _modern(scope: Scope, send: Send, headers: Headers, want_json: bool, extra: list[tuple[bytes, bytes]],
                  ctx: protocol.Context, messages: list[jsonrpc.Message | RpcError], batch: bool) -> None:
    """One 2026-07-28 exchange: a single request, its envelope checked, answered without any session."""
    try:
        message = modern.single(messages, batch)
    except RpcError as exc:
        await respond_json(send, modern.http_status(exc.code), exc.body(exc.request_id), extra)
        return
    if message.is_notification:
        await respond(send, 202, b"", extra)  # this revision defines none from client to server: dropped
        return
    try:
        version = modern.check_envelope(message, headers)
    except RpcError as exc:
        await respond_json(send, modern.http_status(exc.code), exc.body(message.id), extra)
        return
    try:
        answer = await protocol.answer(replace(ctx, version=version, step_up=True), message)
    except tools.ScopeChallenge as challenge:
        await _refuse_for_scope(scope, send, challenge, message.id, extra)
        return
    assert answer is not None
    error = answer.get("error")
    status = modern.http_status(error["code"]) if error else 200
    if status != 200 or want_json:
        await respond_json(send, status, answer, extra)
    else:
        await respond_sse(send, [answer], extra)


async def _refuse_for_scope(scope: Scope, send: Send, challenge: tools.ScopeChallenge,
                            request_id: jsonrpc.RequestId | None, extra: list[tuple[bytes, bytes]]) -> None:
    """403 with the scopes to ask for (MCP's step-up authorization): the OAuth client re-authorizes with them and
    sends the request again. The refusal is in the audit ledger already, as every refusal of a call is."""
    error = RpcError(jsonrpc.INSUFFICIENT_SCOPE, challenge.refusal.message,
                     data={"error": "insufficient_scope", "scope": " ".join(challenge.scopes)})
    header = insufficient_scope_challenge(scope, challenge.scopes, resource_path=PATH).encode("latin-1")
    await respond_json(send, 403, error.body(request_id), [*extra, (b"www-authenticate", header)])


async def _charge_batch(scope: Scope, auth: AuthContext, messages: list[Any]) -> PrismError | None:
    """Each member of a JSON-RPC batch that is answered (a request, or a malformed member, answered with its
    error) counts in the tenant's MCP window, as it would sent alone. The edge counted the HTTP request that
    carried them; the others are counted here, at once. The refusal when they do not fit, or when the limits
    cannot be checked and the limiter fails closed."""
    requests = sum(1 for m in messages if (m.is_request if isinstance(m, jsonrpc.Message) else not m.of_notification))
    if requests < 2:
        return None
    limiter = scope["app"].state.rate_limiter
    try:
        verdict = await limiter.hit_many("mcp", auth.tenant_id, requests - 1)
    except LimiterUnavailable as exc:
        return exc if limiter.fails_closed else None
    assert isinstance(verdict, Verdict)  # no lockout is checked here
    request_context(scope).verdict = verdict
    return None if verdict.allowed else over_limit(verdict)


def _rate_updated(extra: list[tuple[bytes, bytes]], scope: Scope) -> list[tuple[bytes, bytes]]:
    """The answer's headers with X-RateLimit-* of the window as it is now (a batch counts its requests)."""
    return [*(h for h in extra if not h[0].startswith(b"x-ratelimit-")), *_encode(rate_headers(scope))]


def _encode(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


def routes() -> list[BaseRoute]:
    # Both spellings answered directly: MCP clients do not follow redirects on this path. Every method is routed
    # to the door, which answers those it does not serve itself: one 405 in this door's shape, one Allow.
    return door_routes(PATH, McpDoor(), None, JSON_RPC)
