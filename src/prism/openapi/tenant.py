"""The tenant descriptor: OpenAPI 3.0.3 of the tool surface, built once per (registry, visible set).

Anonymous callers get one path per mega-tool door (`/api/mcp/tools/prism_<mega_tool>/`) taking the
invocation envelope; a caller with a credential gets, on top of that, one path per handler it may call
(`/prism/{mega_tool}/{app}/{entity}/{operation}`) with the handler's parameter schema.

The document is serialized once and kept as bytes without `servers`; a request splices its own
`servers[0].url` in front, so one cached build serves every host and a request costs a dictionary lookup
and one copy — whatever the size of the surface.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import orjson

from prism import __version__
from prism.auth.context import AuthContext
from prism.openapi.convert import Components, to_openapi30
from prism.openapi.shapes import ENVELOPE_ERROR_30, ENVELOPE_SUCCESS_30, ERROR_DETAILS_30, envelope_request_30
from prism.registry.catalog import envelope_schema
from prism.registry.mega_tools import LEGACY_BINDINGS, LEGACY_TOOLS, MEGA_TOOLS, tool_name
from prism.registry.model import Handler
from prism.registry.registry import Registry
from prism.registry.visibility import Grant as CallerGrant
from prism.registry.visibility import grant_of, visible_handlers

OPENAPI_VERSION = "3.0.3"
# Statuses a dispatch door answers besides 200, each with the error envelope (docs/architecture.md "Errors").
ERROR_STATUSES: dict[str, str] = {
    "202": "Held for human oversight (`oversight_required`); `details.oversight_request_id` names the request. "
           "Once approved, repeat the call with X-Prism-Oversight-Request.",
    "400": "Unreadable body or arguments that fail the handler's schema (`details.errors[].field`).",
    "401": "Missing, invalid, expired or revoked credential.",
    "403": "The credential lacks the scope or permission, or a governance rule refused the call.",
    "404": "Unknown tool, coordinate or record.",
    "409": "Conflict or invalid state transition.",
    "413": "Body over 1 MiB.",
    "429": "Rate limit reached; Retry-After says when to retry.",
    "503": "Transient: the audit entry could not be written and nothing was changed. Retry.",
}
_ID = {"type": "string", "minLength": 1, "maxLength": 64}
# Optional headers every dispatch door reads (docs/governance.md).
HEADER_PARAMETERS: dict[str, Any] = {
    "Mission": {"name": "X-Prism-Mission", "in": "header", "required": False, "schema": _ID,
                "description": "Account the call's cost to this active mission."},
    "OversightRequest": {"name": "X-Prism-Oversight-Request", "in": "header", "required": False,
                         "schema": _ID,
                         "description": "Run a call that a reviewer approved (the id from the 202 answer)."},
}
_HEADERS = [{"$ref": "#/components/parameters/Mission"}, {"$ref": "#/components/parameters/OversightRequest"}]
Grant = CallerGrant | None  # None: the anonymous descriptor


@dataclass(frozen=True, slots=True)
class Built:
    """One serialized descriptor: `tail` is the JSON document without its first byte and without servers."""

    tail: bytes
    digest: str
    operation_count: int
    # (server url, gzip) -> document bytes: a handful of hosts serve one tenant; never more than ORIGINS_KEPT.
    rendered: dict[tuple[str, bool], bytes] = field(default_factory=dict)

    def etag(self, server_url: str, *, gzipped: bool = False) -> str:
        """Strong, so each representation has its own: the gzip-encoded one carries a `-gz` suffix."""
        tag = hashlib.sha256(f"{self.digest}|{server_url}".encode()).hexdigest()[:40]
        return f'"{tag}-gz"' if gzipped else f'"{tag}"'

    def render(self, server_url: str, *, gzipped: bool = False) -> bytes:
        hit = self.rendered.get((server_url, gzipped))
        if hit is None:
            if len(self.rendered) >= ORIGINS_KEPT:
                self.rendered.clear()
            head = b'{"servers":[{"url":' + orjson.dumps(server_url) + b"}],"
            hit = head + self.tail
            # Compressed once per version and host: 10,000 handlers shrink from ~12 MB to ~0.5 MB on the wire.
            self.rendered[(server_url, gzipped)] = hit = gzip.compress(hit, 6, mtime=0) if gzipped else hit
        return hit


# Origins (the public URL a Host names) whose documents are kept; the Host is the client's, so never unbounded.
ORIGINS_KEPT = 8
_CACHE: WeakKeyDictionary[Registry, dict[Grant, Built]] = WeakKeyDictionary()
_BUILDING: WeakKeyDictionary[Registry, dict[Grant, asyncio.Future[Built]]] = WeakKeyDictionary()


async def tenant_descriptor(registry: Registry, auth: AuthContext | None) -> Built:
    """The descriptor this caller may see, from cache after the first request of its grant.

    A first build of a large surface takes about a second of CPU: it runs in a worker thread, so the event
    loop keeps answering other requests, and concurrent first requests of one grant share one build.
    """
    grant: Grant = grant_of(registry, auth) if auth is not None else None
    per_registry = _CACHE.setdefault(registry, {})
    hit = per_registry.get(grant)
    if hit is not None:
        return hit
    pending = _BUILDING.setdefault(registry, {})
    task = pending.get(grant)
    if task is None:
        handlers = visible_handlers(registry, auth) if auth is not None else None
        task = pending[grant] = asyncio.ensure_future(asyncio.to_thread(_build, registry, handlers))
    try:
        built = await asyncio.shield(task)
    finally:
        if task.done():
            pending.pop(grant, None)
    per_registry[grant] = built
    return built


async def rendered(built: Built, server_url: str, *, gzipped: bool) -> bytes:
    """The document bytes for this host; the first gzip of a large document is compressed off the loop."""
    hit = built.rendered.get((server_url, gzipped))
    if hit is not None:
        return hit
    return await asyncio.to_thread(built.render, server_url, gzipped=gzipped)


def _build(registry: Registry, visible: tuple[Handler, ...] | None) -> Built:
    components = Components()
    paths: dict[str, Any] = {}
    by_mega: dict[str, list[Handler]] = {}
    for handler in (visible if visible is not None else registry):
        by_mega.setdefault(handler.coordinate.mega_tool, []).append(handler)
    tags: dict[str, str] = {}
    for mega_tool in sorted(by_mega):
        tags[mega_tool] = MEGA_TOOLS[mega_tool]
        # Anonymous callers learn the doors, not the names of the apps and operations behind them.
        envelope = envelope_schema(mega_tool, by_mega[mega_tool]) if visible is not None else None
        paths[f"/api/mcp/tools/{tool_name(mega_tool)}/"] = _door(mega_tool, envelope_request_30(envelope))
    if visible is not None:
        schemas: dict[int, dict[str, Any]] = {}  # handlers share parameter schemas: convert each once
        visible_paths = {h.path for h in visible}
        for name, description in LEGACY_TOOLS.items():
            bound = registry.get_path(LEGACY_BINDINGS[name])
            if bound is not None and bound.path in visible_paths:
                paths[f"/api/mcp/tools/{name}/"] = _legacy(name, description, bound.coordinate.mega_tool,
                                                            _schema(bound, schemas, components))
        for handler in visible:
            app_name = handler.coordinate.app
            if app_name not in tags:
                app = registry.apps.get(app_name)
                tags[app_name] = (app.description if app is not None else "") or f"The {app_name} app."
            paths[f"/prism/{handler.path}"] = _operation(handler, _schema(handler, schemas, components))
    document: dict[str, Any] = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Prism tools",
            "version": __version__,
            "description": (
                "Every Prism handler this caller may call. Generated clients post the handler's parameters "
                "to /prism/{mega_tool}/{app}/{entity}/{operation}, or the envelope {app, entity, operation, "
                "arguments} to /api/mcp/tools/prism_<mega_tool>/. Both answer the PrismResponse envelope. "
                "Regenerate clients when the ETag changes."
                if visible is not None else
                "The Prism mega-tool doors. Generated clients post the envelope {app, entity, operation, "
                "arguments} to /api/mcp/tools/prism_<mega_tool>/. Fetch this document with "
                "Authorization: Bearer <key> for one path per handler with its parameter schema."),
        },
        "tags": [{"name": name, "description": text} for name, text in tags.items()],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer",
                                               "description": "A Prism API key (ck_/mcp_) or OAuth access token."}},
            "schemas": {"PrismSuccess": ENVELOPE_SUCCESS_30, "PrismError": ENVELOPE_ERROR_30,
                        "ErrorDetails": ERROR_DETAILS_30,
                        **components.schemas},
            "responses": _responses(),
            "parameters": HEADER_PARAMETERS,
        },
    }
    body = orjson.dumps(document)
    return Built(tail=body[1:], digest=hashlib.sha256(body).hexdigest(), operation_count=len(paths))


def _schema(handler: Handler, cache: dict[int, dict[str, Any]], components: Components) -> dict[str, Any]:
    key = id(handler.schema)
    converted = cache.get(key)
    if converted is None:
        converted = cache[key] = to_openapi30(handler.schema, components)
    return converted


def _responses() -> dict[str, Any]:
    responses: dict[str, Any] = {"Success": {
        "description": "The tool result in the PrismResponse envelope.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PrismSuccess"}}}}}
    for status, text in ERROR_STATUSES.items():
        headers = {"Retry-After": {"description": "Seconds to wait before retrying.",
                                   "schema": {"type": "integer"}}} if status in ("429", "503") else None
        responses[f"Error{status}"] = {
            "description": text,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PrismError"}}},
            **({"headers": headers} if headers else {})}
    return responses


def _outcomes() -> dict[str, Any]:
    return {"200": {"$ref": "#/components/responses/Success"},
            **{status: {"$ref": f"#/components/responses/Error{status}"} for status in ERROR_STATUSES}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _door(mega_tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"post": {
        "operationId": f"call_{tool_name(mega_tool)}",
        "summary": f"Call a {mega_tool} handler through the {tool_name(mega_tool)} door.",
        "description": MEGA_TOOLS[mega_tool],
        "tags": [mega_tool],
        "parameters": _HEADERS,
        "requestBody": _body(schema),
        "responses": _outcomes(),
    }}


def _legacy(name: str, description: str, mega_tool: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"post": {"operationId": f"call_{name}", "summary": description, "tags": [mega_tool],
                     "requestBody": _body(schema), "responses": _outcomes()}}


def _operation(handler: Handler, schema: dict[str, Any]) -> dict[str, Any]:
    c = handler.coordinate
    summary = handler.description.strip().split("\n", 1)[0][:200] or handler.path
    return {"post": {
        "operationId": f"{c.mega_tool}__{c.app}__{c.entity}__{c.operation}",
        "summary": summary,
        **({"description": handler.description} if handler.description.strip() != summary else {}),
        "tags": [c.mega_tool, c.app],
        "parameters": _HEADERS,
        "requestBody": _body(schema),
        "responses": _outcomes(),
        "x-prism-scope": handler.scope,
        "x-prism-permission": handler.permission,
        "x-prism-cost": handler.cost,
    }}
