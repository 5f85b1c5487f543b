"""Each door's error shape, in one renderer per door, and the entrance every route is reached through.

A route is built with the door it belongs to (`door_routes`). Its entrance renders the edge's refusal (a
lockout, a limit, a malformed request) in that door's shape before the endpoint runs, an unavailable database
(pool exhausted, SQLite locked past its timeout) as a 503 in the same shape, and any other failure as a 500
in the same shape. Doors render their own
refusals with the same `Door.body`, so a refusal looks the same whoever decided it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prism.dispatch.response import failure_envelope
from prism.edge.context import request_context
from prism.errors import PrismError
from prism.oauth.challenge import bearer_challenge, insufficient_scope_challenge, step_up_scopes
from prism.registry.mega_tools import tool_name as wire_name
from prism.storage import unavailable_error
from prism.web.responses import error_headers, json_response, send_json

log = logging.getLogger("prism")


class Door:
    """The plain shape: `{error, message}` (and `details` when the error has them)."""

    # The code of this door's 405, a method its path does not answer.
    wrong_method_code = "method_not_allowed"

    def body(self, error: PrismError, scope: Scope) -> dict[str, Any]:
        body: dict[str, Any] = {"error": error.code, "message": error.message}
        if error.details:
            body["details"] = error.details
        return body

    def headers(self, error: PrismError, scope: Scope) -> dict[str, str] | None:
        """The refusal's own headers; a 401 also tells the client how to authenticate, and a 403 that a scope
        would cure tells an OAuth client which scopes to ask for (RFC 6750 section 3.1: `insufficient_scope`; an
        API key's scopes are fixed when it is minted)."""
        headers = error_headers(error)
        if error.status == 401:
            headers = {"WWW-Authenticate": bearer_challenge(scope, error), **(headers or {})}
        elif (scopes := step_up_scopes(request_context(scope).auth, error)) is not None:
            headers = {"WWW-Authenticate": insufficient_scope_challenge(scope, scopes), **(headers or {})}
        return headers

    async def refuse(self, scope: Scope, receive: Receive, send: Send, error: PrismError) -> None:
        await send_json(send, self.body(error, scope), error.status, self.headers(error, scope))

    def response(self, error: PrismError, scope: Scope) -> Response:
        """The refusal as a Response, for Starlette endpoints."""
        return json_response(self.body(error, scope), error.status, self.headers(error, scope))


class PasswordDoor(Door):
    """The plain shape, for an endpoint that takes an email and password in its body (key registration): its 401
    is a wrong password, and a Bearer challenge would send a client looking for a token it has no use for."""

    def headers(self, error: PrismError, scope: Scope) -> dict[str, str] | None:
        return error_headers(error)


class EnvelopeDoor(Door):
    """The canonical envelope `{success: false, error, message, tool_name}` (SPEC.md "Canonical tool dispatch")."""

    def body(self, error: PrismError, scope: Scope) -> dict[str, Any]:
        params = scope.get("path_params", {})
        return failure_envelope(error, params.get("tool_name") or wire_name(params.get("mega_tool", "")))


class SandboxCallDoor(Door):
    """`{error, message, tool_name}` of /api/v1/dev/call/: the tool is unknown until the body is read."""

    def body(self, error: PrismError, scope: Scope, tool_name: str | None = None) -> dict[str, Any]:
        return {**super().body(error, scope), "tool_name": tool_name}


class OAuthDoor(Door):
    """RFC 6749 errors: `{error, error_description}`."""

    # RFC 6749 has no code for a wrong method; the request is malformed for this endpoint (section 5.2).
    wrong_method_code = "invalid_request"

    def body(self, error: PrismError, scope: Scope) -> dict[str, Any]:
        return {"error": error.code, "error_description": error.message}


class CorsDoor(Door):
    """Another door's refusals with the CORS headers its endpoints' answers carry: a browser-based client reads a
    refusal (a limit, a wrong method) of an endpoint it calls cross-origin as it reads its other answers."""

    def __init__(self, door: Door, cors: dict[str, str]) -> None:
        self.door = door
        self.cors = cors
        self.wrong_method_code = door.wrong_method_code

    def body(self, error: PrismError, scope: Scope) -> dict[str, Any]:
        return self.door.body(error, scope)

    def headers(self, error: PrismError, scope: Scope) -> dict[str, str] | None:
        return {**self.cors, **(self.door.headers(error, scope) or {})}


class PageDoor(Door):
    """Pages a person reads: the refusal as a page, not JSON."""

    async def refuse(self, scope: Scope, receive: Receive, send: Send, error: PrismError) -> None:
        await self.page(error, scope)(scope, receive, send)

    def page(self, error: PrismError, scope: Scope) -> Response:
        """The refusal as a page, for the pages' own refusals (a lockout the login form decides)."""
        from prism.web.browser import render  # imported late: the browser module imports the doors' readers

        heading = "Too many requests" if error.status == 429 else "Request refused"
        response = render(Request(scope), "message.html",
                          {"heading": heading, "error": error.code, "message": error.message},
                          status=error.status)
        response.headers.update(self.headers(error, scope) or {})
        return response


class AuthorizeDoor(PageDoor, OAuthDoor):
    """The authorize endpoint: a person's browser reads its refusals as pages; a 405, which no browser causes
    (they only GET and POST it), is answered to the program that sent it in the RFC 6749 JSON shape."""


PLAIN = Door()
PASSWORD = PasswordDoor()
ENVELOPE = EnvelopeDoor()
SANDBOX_CALL = SandboxCallDoor()
OAUTH = OAuthDoor()
PAGE = PageDoor()
AUTHORIZE = AuthorizeDoor()


class Entrance:
    """The ASGI app of one route: the edge's refusal or the endpoint, and a 503 for an unavailable database."""

    def __init__(self, app: ASGIApp, door: Door) -> None:
        self.app = app
        self.door = door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = request_context(scope).refusal
        if refusal is not None:
            await self.door.refuse(scope, receive, send, refusal)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except ClientDisconnect:
            return  # the client left before its request was read: nobody to answer, nothing was run
        except HTTPException:
            raise  # Starlette's own answers
        except Exception as exc:
            if started:
                raise
            # A domain error no endpoint caught (a relay or database out of reach) keeps its status and headers.
            error = exc if isinstance(exc, PrismError) else unavailable_error(exc)
            if error is None:
                log.error("unhandled error on %s %s", scope["method"], scope["path"], exc_info=exc)
                error = PrismError("internal server error")
            await self.door.refuse(scope, receive, send, error)


Endpoint = Callable[..., Any]


def door_routes(path: str, endpoint: Endpoint | ASGIApp, methods: list[str] | None, door: Door) -> list[BaseRoute]:
    """The path with and without its trailing slash, answered directly (never a redirect), through `door`.

    `endpoint` is a Starlette endpoint (a function taking a Request) or an ASGI app (the raw doors). `methods`
    None routes every method to it: a door that answers unserved methods itself, in its own shape."""
    app: ASGIApp = request_response(endpoint) if _is_function(endpoint) else endpoint  # type: ignore[arg-type]
    entrance = Entrance(app, door)
    bare = path.rstrip("/")
    return [Route(bare, entrance, methods=methods), Route(bare + "/", entrance, methods=methods)]


def _is_function(endpoint: object) -> bool:
    return inspect.isfunction(endpoint) or inspect.ismethod(endpoint)
