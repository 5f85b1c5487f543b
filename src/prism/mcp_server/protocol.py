"""The MCP methods Prism answers, whatever the transport (streamable HTTP or legacy SSE) and the revision."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from prism import __version__
from prism.auth.context import AuthContext
from prism.dispatch.dispatcher import Dispatcher
from prism.mcp_server import resources, revisions, tools
from prism.mcp_server.jsonrpc import INTERNAL_ERROR, METHOD_NOT_FOUND, Message, RpcError, result
from prism.registry.registry import Registry

log = logging.getLogger("prism.mcp")

INSTRUCTIONS = (
    "Prism exposes governed business operations. Each prism_<mega_tool> tool (or, on the split surface, its "
    "_read, _write and _destructive variants) takes {operation, app, entity, arguments}. To find the operation "
    "for a task, call prism_search with the request in plain words: each result gives the tool to call, the "
    "arguments' schema and a call recipe with what the request already says filled in. Use prism_introspect to "
    "browse apps, entities and operations, or to read one operation's parameter schema. Every call is "
    "authorized, audited and may be refused by policy.")
SERVER_INFO = {"name": "prism", "title": "Prism", "version": __version__}
# Resources: the documents that tool results link to (resources.py); they are reached through those links and
# the template, never listed (a tenant's documents are searched with tools).
CAPABILITIES = {"tools": {"listChanged": False}, "resources": {"listChanged": False}}
# How long a 2026-07-28 client may reuse server/discover and tools/list answers. The tool list follows the
# credential's grant, which an administrator may change at any time: a minute bounds how stale it gets (a call
# is authorized on its own whatever the client cached).
CACHE_TTL_MS = 60_000


@dataclass(frozen=True, slots=True)
class Context:
    auth: AuthContext
    dispatcher: Dispatcher
    registry: Registry
    page_size: int
    version: str
    surface: str = "mega"
    # The request has an HTTP exchange of its own (one request per POST on streamable HTTP): a tools/call an
    # OAuth token lacks a scope for is refused there with 403 (tools.ScopeChallenge), not as a tool result.
    step_up: bool = False


def negotiate(params: dict[str, Any]) -> str:
    """The handshake revision we answer: the client's, when we speak it, else our latest (the client decides)."""
    requested = params.get("protocolVersion")
    return requested if requested in revisions.HANDSHAKE else revisions.LATEST_HANDSHAKE


def initialize_result(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS}


def discover_result() -> dict[str, Any]:
    """server/discover (2026-07-28): every revision we speak, newest first; the same for every caller."""
    return {"supportedVersions": list(revisions.SUPPORTED), "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS, "cacheScope": "public", "ttlMs": CACHE_TTL_MS}


async def answer(ctx: Context, message: Message) -> dict[str, Any] | None:
    """The response to one message; None for notifications and client responses (nothing to answer)."""
    if not message.is_request:
        return None
    try:
        value = await _run(ctx, message)
    except RpcError as exc:
        return exc.body(message.id)
    except tools.ScopeChallenge:
        raise  # the transport answers it (endpoints.py)
    except Exception:
        # Prism's failure, not the caller's (the call's audit entry says so): this request's answer is an error,
        # and the other requests of its batch, which may have written, still get theirs.
        log.exception("MCP %s failed", message.method)
        return _INTERNAL.body(message.id)
    if revisions.is_modern(ctx.version):
        # 2026-07-28 results say what they are, and who answered.
        meta = value.get("_meta")
        value = {**value, "resultType": "complete",
                 "_meta": {**meta, revisions.SERVER_INFO_META: SERVER_INFO} if meta else _SERVER_META}
    return result(message.id, value)


_SERVER_META = {revisions.SERVER_INFO_META: SERVER_INFO}
_INTERNAL = RpcError(INTERNAL_ERROR, "internal server error", data={"error": "internal_error"})


def _cacheable(ctx: Context, value: dict[str, Any], scope: str, ttl_ms: int = CACHE_TTL_MS) -> dict[str, Any]:
    """2026-07-28 list and read results say who may cache them and for how long."""
    if revisions.is_modern(ctx.version):
        value.update(cacheScope=scope, ttlMs=ttl_ms)
    return value


async def _run(ctx: Context, message: Message) -> dict[str, Any]:
    method, params = message.method, message.params
    if method == "tools/call":
        return await tools.call_tool(ctx.dispatcher, ctx.auth, params, ctx.version, step_up=ctx.step_up)
    if method == "tools/list":
        listed = tools.page(tools.list_tools(ctx.registry, ctx.auth, ctx.version, ctx.surface), params.get("cursor"),
                            ctx.page_size)
        return _cacheable(ctx, listed, "private")  # the list is this credential's
    if method == "resources/read":
        # A document changes when it is updated or archived: never cached.
        return _cacheable(ctx, await resources.read(ctx.dispatcher, ctx.auth, params, ctx.version), "private", ttl_ms=0)
    if method == "resources/list":
        return _cacheable(ctx, {"resources": []}, "public")
    if method == "resources/templates/list":
        return _cacheable(ctx, {"resourceTemplates": [resources.TEMPLATE]}, "public")
    if method == "ping":
        return {}
    if revisions.is_modern(ctx.version):
        if method == "server/discover":
            return discover_result()
    elif method == "initialize":
        # Reached on the legacy HTTP+SSE transport only (endpoints.py answers streamable HTTP's handshake), which
        # speaks its own revision whatever the client offers: the shapes of every answer on it are that one's.
        return initialize_result(ctx.version)
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", data={"error": "method_not_found"})
