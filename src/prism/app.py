"""The application factory: one Starlette app serving every door of every host."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from prism.auth.authenticator import Authenticator
from prism.canonical import endpoints as canonical
from prism.config import Settings, get_settings
from prism.storage import Database
from prism.dispatch.dispatcher import Dispatcher
from prism.keys.endpoints import routes as key_routes
from prism.kit.collector import collector_paused, start_serving
from prism.mcp_server import endpoints as mcp_door
from prism.oauth.challenge import ResourceMetadataChallenge
from prism.oauth.routes import routes as oauth_routes
from prism.openapi.endpoints import routes as openapi_routes
from prism.ratelimit import install_rate_limits
from prism.ratelimit.middleware import RateLimitMiddleware
from prism.registry import Registry, search
from prism.registry.registry import build_registry
from prism.sandbox import endpoints as sandbox
from prism.web.responses import json_response, send_json
from prism.webhooks import tasks as webhook_tasks
from prism.webhooks.endpoints import routes as webhook_routes

log = logging.getLogger("prism")


def both(path: str, endpoint: object, methods: list[str]) -> list[BaseRoute]:
    """The path with and without its trailing slash, answered directly (never a redirect)."""
    bare = path.rstrip("/")
    return [Route(bare, endpoint, methods=methods), Route(bare + "/", endpoint, methods=methods)]  # type: ignore[arg-type]


def routes() -> list[BaseRoute]:
    # The canonical dispatch door first: routes are matched in order, and it carries most of the traffic.
    return [
        *both("/api/mcp/tools/{tool_name}/", canonical.call_tool, ["POST"]),
        *mcp_door.routes(),  # the MCP door: every agent call of MCP clients
        *both("/prism/{mega_tool}/{app}/{entity}/{operation}", canonical.call_coordinate, ["POST"]),
        *both("/api/v1/dev/call/", sandbox.call, ["POST"]),
        *both("/api/v1/dev/ping/", sandbox.ping, ["GET"]),
        *both("/api/v1/dev/me/", sandbox.me, ["GET"]),
        *both("/api/v1/dev/tools/", sandbox.tools, ["GET"]),
        *both("/api/v1/dev/introspect/", sandbox.introspect, ["GET", "POST"]),
        *oauth_routes(),
        *openapi_routes(),
        *key_routes(),
        *webhook_routes(),
    ]


_TOOLS_PREFIX = "/api/mcp/tools/"
_MCP_PATHS = frozenset({mcp_door.PATH, mcp_door.PATH + "/"})
INTERNAL_ERROR = {"error": "internal_error", "message": "internal server error"}
YOUNG_GENERATION_THRESHOLD = 5000  # allocations between collections of the youngest generation (default 700)


async def _canonical_door(scope: Scope, receive: Receive, send: Send) -> None:
    try:
        answer = await canonical.call_tool.answer(scope, receive)
    except Exception as exc:  # what ServerErrorMiddleware does for routed requests
        log.error("unhandled error on %s %s", scope["method"], scope["path"], exc_info=exc)
        answer = INTERNAL_ERROR, 500, None
    if answer[1] == 401:
        # The one middleware the fast path keeps, for the only answers it changes: a 401 must point OAuth
        # clients at the resource metadata too.
        async def respond(scope: Scope, receive: Receive, send: Send) -> None:
            await send_json(send, *answer)

        await ResourceMetadataChallenge(respond)(scope, receive, send)
        return
    await send_json(send, *answer)


class AppState(State):
    """Starlette's `app.state`, whose attributes are plain instance attributes as well.

    State keeps its values in a dict and answers every attribute read through `__getattr__`, a Python call;
    a dispatch reads `app.state` five times (dispatcher, settings, authenticator, limiter, addresses). Here
    each value is also set on the instance, so a read is an ordinary attribute lookup. Every way of setting
    or deleting goes through both places.
    """

    def __setattr__(self, key: str, value: object) -> None:
        super().__setattr__(key, value)
        object.__setattr__(self, key, value)

    def __delattr__(self, key: str) -> None:
        super().__delattr__(key)
        object.__delattr__(self, key)

    def __setitem__(self, key: str, value: object) -> None:
        self.__setattr__(key, value)

    def __delitem__(self, key: str) -> None:
        self.__delattr__(key)


class PrismApp(Starlette):
    """Starlette, with the two dispatch doors answered before the routing machinery.

    `POST /api/mcp/tools/<tool_name>/` and `POST /api/mcp/sse` carry most of the traffic. The canonical door
    goes to the same endpoint the route table names, without the router's per-route matching and the
    exception-handling and rate-limit middleware around it (its own authentication applies the lockout and
    the per-user limit). The MCP door keeps the rate-limit middleware (lockout, failed credentials) and skips
    the rest: it answers its own errors and 401s. Per request, that machinery costs about as much as Prism's
    own authentication. Everything else, and anything unusual (a root path), takes the normal route.
    """

    # The MCP door behind the rate-limit middleware only (it answers its own 401s and errors), set by
    # create_app once the limiter exists.
    mcp_fast_door: ASGIApp | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = AppState()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            path: str = scope["path"]
            if path in _MCP_PATHS and self.mcp_fast_door is not None:
                scope["app"] = self
                await self.mcp_fast_door(scope, receive, send)
                return
            if path.startswith(_TOOLS_PREFIX):
                tool_name = path[len(_TOOLS_PREFIX):].removesuffix("/")
                if tool_name and "/" not in tool_name:
                    scope["app"] = self
                    scope["path_params"] = {"tool_name": tool_name}
                    await _canonical_door(scope, receive, send)
                    return
        await super().__call__(scope, receive, send)


async def not_found(request: Request, exc: Exception) -> Response:
    return json_response({"error": "not_found", "message": f"no route {request.url.path}"}, 404)


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return json_response({"error": "method_not_allowed", "message": f"{request.method} not allowed here"}, 405,
                         getattr(exc, "headers", None))  # keeps the Allow header


async def server_error(request: Request, exc: Exception) -> Response:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return json_response(INTERNAL_ERROR, 500)


async def _flush_touches_forever(authenticator: Authenticator, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await authenticator.flush_touches()
        except Exception:
            log.exception("could not record key usage")


def create_app(settings: Settings | None = None, *, registry: Registry | None = None) -> Starlette:
    settings = settings or get_settings()
    with collector_paused():
        registry = registry or build_registry(s for s in settings.apps.split(",") if s.strip())
        # Build the capability-search index now rather than on the first search request.
        search.warm([registry])

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = Database(settings.database_url)
        app.state.db = db
        app.state.authenticator = Authenticator(db, cache_seconds=settings.credential_cache_seconds,
                                                settings=settings)
        app.state.dispatcher = Dispatcher(db, registry, settings)
        app.state.webhook_worker = webhook_tasks.start_in_process(db, settings)  # delivers events; may be off
        flusher = asyncio.create_task(
            _flush_touches_forever(app.state.authenticator, settings.key_touch_interval_seconds))
        # Everything allocated so far (registry, schemas, search index) lives as long as the process: move it
        # out of the collector's reach, so full collections stop walking it (they caused the p99 pauses).
        # No collection first: start-up leaves under 2,000 garbage objects, and walking the 10,000-handler
        # heap to find them took 0.4 s of start-up. Unfrozen when the app stops, so an app started and
        # stopped many times in one process (tests) does not keep its garbage forever.
        start_serving()
        # A dispatch allocates a few hundred objects, nearly all gone when it answers. At Python's default
        # threshold the youngest generation is collected every few requests, each time with dozens of requests
        # in flight whose objects it walks and promotes: measured under the dispatch load, 4-7 µs of collection
        # per request at 700, 0.5 µs at 3,000 and above. Restored when the app stops.
        thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *thresholds[1:])
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            if app.state.webhook_worker is not None:
                await app.state.webhook_worker.stop()
            await app.state.dispatcher.close()
            await app.state.authenticator.flush_touches()
            await db.dispose()

    app = PrismApp(routes=routes(), lifespan=lifespan, exception_handlers={
        404: not_found, 405: method_not_allowed, 500: server_error})
    assert isinstance(app.router, Router)
    app.router.redirect_slashes = False
    app.state.settings = settings
    app.state.registry = registry
    limiter = install_rate_limits(app, settings)
    app.add_middleware(ResourceMetadataChallenge)
    app.mcp_fast_door = RateLimitMiddleware(mcp_door.McpDoor(), limiter=limiter,
                                            addresses=app.state.client_addresses)
    return app
