"""The MCP methods Prism answers, whatever the transport (streamable HTTP or legacy SSE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prism import __version__
from prism.auth.context import AuthContext
from prism.dispatch.dispatcher import Dispatcher
from prism.mcp_server import tools
from prism.mcp_server.jsonrpc import METHOD_NOT_FOUND, Message, RpcError, result
from prism.mcp_server.sessions import LATEST_VERSION, SUPPORTED_VERSIONS
from prism.registry.registry import Registry

INSTRUCTIONS = (
    "Prism exposes governed business operations. Each prism_<mega_tool> tool takes "
    "{operation, app, entity, arguments}; use prism_introspect to discover apps, entities, operations and "
    "their parameter schemas. Every call is authorized, audited and may be refused by policy.")


@dataclass(frozen=True, slots=True)
class Context:
    auth: AuthContext
    dispatcher: Dispatcher
    registry: Registry
    page_size: int


def negotiate(params: dict[str, Any]) -> str:
    """The version we answer: the client's, when we speak it, else our latest (the client then decides)."""
    requested = params.get("protocolVersion")
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "prism", "title": "Prism", "version": __version__},
        "instructions": INSTRUCTIONS,
    }


async def answer(ctx: Context, message: Message) -> dict[str, Any] | None:
    """The response to one message; None for notifications and client responses (nothing to answer)."""
    if not message.is_request:
        return None
    try:
        return result(message.id, await _run(ctx, message))
    except RpcError as exc:
        return exc.body(message.id)


async def _run(ctx: Context, message: Message) -> dict[str, Any]:
    method, params = message.method, message.params
    if method == "tools/call":
        return await tools.call_tool(ctx.dispatcher, ctx.auth, params)
    if method == "tools/list":
        return tools.page(tools.list_tools(ctx.registry, ctx.auth), params.get("cursor"), ctx.page_size)
    if method == "ping":
        return {}
    if method == "initialize":
        return initialize_result(negotiate(params))
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", data={"error": "method_not_found"})
