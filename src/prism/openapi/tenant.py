"""The tenant descriptor: OpenAPI 3.0.3 of the tool surface, built once per (registry, view).

Anonymous callers get one path per mega-tool door (`/api/mcp/tools/prism_<mega_tool>/`) taking the
invocation envelope; a caller with a credential gets, on top of that, one path per handler it may call
(`/prism/{mega_tool}/{app}/{entity}/{operation}`) with the handler's parameter schema.

A document is keyed by what its caller sees (`registry.visibility.View.key`), not by the credential's grant:
callers whose scopes differ but show the same handlers share one build. Kept documents are bounded in number
and bytes (`DESCRIPTORS_KEPT`, `DESCRIPTOR_BYTES_KEPT`), least recently used evicted first.

Only `servers` depends on the host a request names, so it is the document's last member: the rest is serialized
once, and gzip-compressed once with its compressor kept after a sync flush. A request sends the kept body as it
is and its own `servers` after it (`Built.pieces`: the body is never copied), or finishes a copy of the
compressor with it (a few hundred bytes of compression): every tenant host and port costs the same, and nothing
per host is kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import zlib
from dataclasses import dataclass
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import orjson

from prism import __version__
from prism.auth.context import AuthContext
from prism.kit.ids import GOVERNANCE_ID_LENGTH
from prism.kit.lru import LRU
from prism.openapi.convert import Components, to_openapi30
from prism.openapi.shapes import ENVELOPE_ERROR_30, ENVELOPE_SUCCESS_30, ERROR_DETAILS_30, envelope_request_30
from prism.registry.catalog import envelope_schema
from prism.registry.mega_tools import LEGACY_BINDINGS, LEGACY_TOOLS, MEGA_TOOLS, tool_name
from prism.registry.model import Handler
from prism.registry.registry import Registry
from prism.registry.visibility import view_of

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
_ID = {"type": "string", "minLength": 1, "maxLength": GOVERNANCE_ID_LENGTH}
# Optional headers every dispatch door reads (docs/governance.md).
HEADER_PARAMETERS: dict[str, Any] = {
    "Mission": {"name": "X-Prism-Mission", "in": "header", "required": False, "schema": _ID,
                "description": "Account the call's cost to this active mission."},
    "OversightRequest": {"name": "X-Prism-Oversight-Request", "in": "header", "required": False,
                         "schema": _ID,
                         "description": "Run a call that a reviewer approved (the id from the 202 answer)."},
}
_HEADERS = [{"$ref": "#/components/parameters/Mission"}, {"$ref": "#/components/parameters/OversightRequest"}]
# Documents kept per registry: at most this many views, and at most this many bytes of them (a document of
# 8,900 handlers is ~13 MB, so ~9 of those; a surface of a few hundred handlers is well under 1 MB each).
DESCRIPTORS_KEPT = 32
DESCRIPTOR_BYTES_KEPT = 128 * 1024 * 1024
# What a kept gzip compressor holds besides the document (zlib's window and hash tables at level 6).
COMPRESSOR_BYTES = 300 * 1024
GZIP_LEVEL = 6
ViewKey = str | None  # None: the anonymous descriptor


class Compressor(Protocol):
    """What `zlib.compressobj` returns (its class is private to zlib)."""

    def compress(self, data: bytes, /) -> bytes: ...
    def flush(self, mode: int = ..., /) -> bytes: ...
    def copy(self) -> Compressor: ...


@dataclass
class DescriptorCounts:
    """Work done on whole documents in this process: what a cached request must never add to."""

    builds: int = 0
    compressions: int = 0


counts = DescriptorCounts()


@dataclass(frozen=True, slots=True, eq=False)
class Built:
    """One serialized descriptor. `body`: the JSON document up to where `servers` goes (its last member);
    `gzip_body`: `body` gzip-compressed and sync-flushed, `compressor` the state that continues it."""

    body: bytes
    gzip_body: bytes
    compressor: Compressor
    digest: str
    operation_count: int

    def etag(self, server_url: str, *, gzipped: bool = False) -> str:
        """Strong, so each representation has its own: the gzip-encoded one carries a `-gz` suffix."""
        tag = hashlib.sha256(f"{self.digest}|{server_url}".encode()).hexdigest()[:40]
        return f'"{tag}-gz"' if gzipped else f'"{tag}"'

    def pieces(self, server_url: str, *, gzipped: bool = False) -> tuple[bytes, bytes]:
        """The document for this host in two pieces, sent one after the other: the kept body itself (never joined
        into a copy: ~14 MB at 10,000 handlers) and this host's `servers` with the closing brace."""
        servers = b',"servers":[{"url":' + orjson.dumps(server_url) + b"}]}"
        if not gzipped:
            return self.body, servers
        finish = self.compressor.copy()  # the shared one stays at the sync point for the next host
        return self.gzip_body, finish.compress(servers) + finish.flush()

    @property
    def size(self) -> int:
        return len(self.body) + len(self.gzip_body) + COMPRESSOR_BYTES


_CACHE: WeakKeyDictionary[Registry, LRU[ViewKey, Built]] = WeakKeyDictionary()
_BUILDING: WeakKeyDictionary[Registry, dict[ViewKey, asyncio.Future[Built]]] = WeakKeyDictionary()


def kept_descriptors(registry: Registry) -> LRU[ViewKey, Built]:
    """The documents kept for `registry`, by view key."""
    kept = _CACHE.get(registry)
    if kept is None:
        kept = _CACHE.setdefault(registry, LRU(DESCRIPTORS_KEPT, max_weight=DESCRIPTOR_BYTES_KEPT,
                                               weigh=lambda built: built.size))
    return kept


async def tenant_descriptor(registry: Registry, auth: AuthContext | None) -> Built:
    """The descriptor this caller may see, from cache after the first request of its view.

    A first build of a large surface takes about a second of CPU: it runs in a worker thread, so the event
    loop keeps answering other requests, and concurrent first requests of one view share one build.
    """
    view = view_of(registry, auth) if auth is not None else None
    key: ViewKey = view.key if view is not None else None
    kept = kept_descriptors(registry)
    hit = kept.get(key)
    if hit is not None:
        return hit
    pending = _BUILDING.setdefault(registry, {})
    task = pending.get(key)
    if task is None:
        handlers = view.handlers if view is not None else None
        task = pending[key] = asyncio.ensure_future(asyncio.to_thread(_build, registry, handlers))

        def settle(done: asyncio.Future[Built]) -> None:
            # Here rather than in a waiter: a build whose waiters all went away is still kept, and never pending.
            pending.pop(key, None)
            if not done.cancelled() and done.exception() is None:
                kept.put(key, done.result())

        task.add_done_callback(settle)
    return await asyncio.shield(task)


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
    return _serialized(document, operation_count=len(paths))


def _serialized(document: dict[str, Any], *, operation_count: int) -> Built:
    """`document` (without `servers`) as bytes ready for any host, compressed once (10,000 handlers shrink from
    ~12 MB to ~0.5 MB on the wire)."""
    whole = orjson.dumps(document)
    body = whole[:-1]  # without its closing brace: `servers` and the brace follow per host
    compressor: Compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip framing
    gzip_body = compressor.compress(body) + compressor.flush(zlib.Z_SYNC_FLUSH)
    counts.builds += 1
    counts.compressions += 1
    return Built(body=body, gzip_body=gzip_body, compressor=compressor,
                 digest=hashlib.sha256(whole).hexdigest(), operation_count=operation_count)


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
