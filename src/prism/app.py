"""The application factory: one Starlette app serving every door of every host."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Router
from starlette.types import Scope

from prism.auth.authenticator import Authenticator
from prism.canonical import endpoints as canonical
from prism.config import Settings, get_settings
from prism.console.endpoints import routes as console_routes
from prism.dispatch.dispatcher import Dispatcher
from prism.edge.context import SCOPE_KEY, request_context
from prism.edge.doors import ENVELOPE, PLAIN, SANDBOX_CALL, Door, door_routes
from prism.edge.hosts import HostPolicy
from prism.edge.stack import Edge
from prism.errors import NotFound, PrismError
from prism.health.checks import Readiness
from prism.health.endpoints import routes as health_routes
from prism.integrations.mcp_sessions import close_all as close_upstream_sessions
from prism.integrations.runtime import IntegrationRuntime
from prism.integrations.runtime import stop as stop_watching
from prism.integrations.upstream import close_clients as close_outbound_clients
from prism.keys.endpoints import routes as key_routes
from prism.kit.networks import parse_networks
from prism.mcp_server import endpoints as mcp_door
from prism.oauth.routes import routes as oauth_routes
from prism.observability.logs import configure_logging
from prism.observability.pools import observe_pools
from prism.observability.request_id import REQUEST_ID_HEADER
from prism.observability.scrape import MetricsAccess
from prism.observability.scrape import routes as metrics_routes
from prism.observability.tracing import TRACER
from prism.openapi.endpoints import routes as openapi_routes
from prism.ratelimit.addresses import AddressResolver
from prism.ratelimit.limiter import build_limiter
from prism.registry import Registry, search
from prism.registry.registry import build_registry
from prism.sandbox import endpoints as sandbox
from prism.storage import Database
from prism.storage.engines import StorageOptions
from prism.web.responses import json_response
from prism.webhooks import tasks as webhook_tasks
from prism.webhooks.endpoints import routes as webhook_routes

log = logging.getLogger("prism")


INTERNAL_ERROR = {"error": "internal_error", "message": "internal server error"}


def routes() -> list[BaseRoute]:
    return [
        # The doors first: the router tries routes in order, and every governed call comes through one of them.
        *door_routes("/api/mcp/tools/{tool_name}/", canonical.call_tool, ["POST"], ENVELOPE),
        *mcp_door.routes(),
        *door_routes("/prism/{mega_tool}/{app}/{entity}/{operation}", canonical.call_coordinate, ["POST"], ENVELOPE),
        *door_routes("/api/v1/dev/call/", sandbox.call, ["POST"], SANDBOX_CALL),
        *door_routes("/api/v1/dev/ping/", sandbox.ping, ["GET"], PLAIN),
        *door_routes("/api/v1/dev/me/", sandbox.me, ["GET"], PLAIN),
        *door_routes("/api/v1/dev/tools/", sandbox.tools, ["GET"], PLAIN),
        *door_routes("/api/v1/dev/introspect/", sandbox.introspect, ["GET", "POST"], PLAIN),
        *health_routes(),
        *metrics_routes(),
        *oauth_routes(),
        *openapi_routes(),
        *key_routes(),
        *webhook_routes(),
        *console_routes(),
    ]


def _refusal_or(request: Request, error: PrismError) -> Response:
    """A path no route answers: the edge's refusal if it made one (a locked-out address stays refused
    everywhere), else `error`."""
    return PLAIN.response(request_context(request.scope).refusal or error, request.scope)


async def not_found(request: Request, exc: Exception) -> Response:
    return _refusal_or(request, NotFound(f"no route {request.url.path}"))


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    """A method the path does not answer: 405 with `Allow`, in the shape (and with the headers: CORS on the OAuth
    endpoints) of the door that serves the path, as its other answers are."""
    allow = ", ".join(allowed_methods(request.app.router.routes, request.scope))
    door, scope = _door_of(request.app.router.routes, request.scope)
    refusal = request_context(request.scope).refusal  # a locked-out address stays refused everywhere
    if refusal is not None:
        return door.response(refusal, scope)
    error = PrismError(f"{request.method} not allowed here; allowed: {allow}", code=door.wrong_method_code,
                       status=405)
    response = door.response(error, scope)
    response.headers["Allow"] = allow
    return response


def _door_of(routes: list[BaseRoute], scope: Scope) -> tuple[Door, Scope]:
    """The door of the route this path belongs to, and the scope with its path parameters (the envelope names the
    tool from them); the plain door for a path no door's route serves."""
    for route in routes:
        match, child = route.matches(scope)
        door = getattr(getattr(route, "app", None), "door", None)
        if match != Match.NONE and isinstance(door, Door):
            return door, {**scope, **child}
    return PLAIN, scope


def allowed_methods(routes: list[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route of this path answers. Starlette's own 405 names the methods of the first route
    that matched the path only, while a path may be served by several (GET and POST of introspection)."""
    methods: set[str] = set()
    for route in routes:
        match, _ = route.matches({**scope, "method": "GET"})
        if match != Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return sorted(methods)


async def server_error(request: Request, exc: Exception) -> Response:
    """The last resort's 500, answered outside the edge: it names the request's id as every other answer does, so
    the client's report and the log line meet."""
    context = request.scope.get(SCOPE_KEY)  # none when the edge itself failed before making it
    request_id = context.request_id if context is not None else None
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc,
              extra={"fields": {"request_id": request_id}})
    return json_response(INTERNAL_ERROR, 500, {REQUEST_ID_HEADER.decode(): request_id} if request_id else None)


async def _flush_touches_forever(authenticator: Authenticator, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            await authenticator.flush_touches()
        except Exception:
            log.exception("could not record key usage")


def _serve_registry(app: Starlette, registry: Registry) -> None:
    """From now on, every door and the dispatcher serve `registry` (calls in flight finish on theirs)."""
    app.state.registry = registry
    app.state.dispatcher.registry = registry


def create_app(settings: Settings | None = None, *, registry: Registry | None = None) -> Starlette:
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format)
    if settings.tracing == "otel":  # process-wide, like the tracer provider it reports to
        TRACER.enable()
    registry = registry or build_registry(s for s in settings.apps.split(",") if s.strip())
    search.warm([registry])  # the capability-search index now rather than on the first search request

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        db = Database(settings.database_url, StorageOptions.from_settings(settings))
        app.state.db = db
        observe_pools(db)
        app.state.authenticator = Authenticator(db, cache_seconds=settings.credential_cache_seconds,
                                                settings=settings)
        app.state.dispatcher = Dispatcher(db, registry, settings, limiter)
        app.state.dispatcher.start()
        # Imported integrations (docs/integrations.md): their handlers join the registry now, and whenever
        # they change, in this process or another.
        integrations = IntegrationRuntime(db, registry, partial(_serve_registry, app))
        await integrations.first_load()
        watcher = asyncio.create_task(integrations.watch(settings.integrations_refresh_seconds))
        app.state.webhook_worker = webhook_tasks.start_in_process(db, settings)  # delivers events; may be off
        app.state.readiness = Readiness(db, limiter if settings.redis_url else None,
                                        stall_seconds=settings.health_webhook_stall_seconds)
        flusher = asyncio.create_task(
            _flush_touches_forever(app.state.authenticator, settings.key_touch_interval_seconds))
        try:
            yield
        finally:
            await stop_watching(watcher)
            await close_outbound_clients()
            await close_upstream_sessions()
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            if app.state.webhook_worker is not None:
                await app.state.webhook_worker.stop()
            await app.state.dispatcher.close()
            streams = getattr(app.state, "mcp_streams", None)  # made with the first legacy MCP stream
            if streams is not None:
                await streams.aclose()
            await app.state.authenticator.flush_touches()
            await db.dispose()

    limiter = build_limiter(settings)
    addresses = AddressResolver(parse_networks(settings.trusted_proxies))
    app = Starlette(routes=routes(), lifespan=lifespan, exception_handlers={
        404: not_found, 405: method_not_allowed, 500: server_error}, middleware=[
        Middleware(Edge, limiter=limiter, addresses=addresses, hosts=HostPolicy.from_settings(settings)),
    ])
    assert isinstance(app.router, Router)
    app.router.redirect_slashes = False
    app.state.settings = settings
    app.state.registry = registry
    app.state.rate_limiter = limiter
    app.state.metrics_access = MetricsAccess(settings)
    return app
