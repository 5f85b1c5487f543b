"""MCP tools: the `prism_<mega_tool>` doors and the utility tools, listed and called per caller.

A tool is listed only when the caller may call at least one handler through it (the same catalog as
GET /api/v1/dev/tools/). `tools/call` goes through the one dispatcher with door "mcp"; a refusal or failure
becomes an `isError` result whose text is the PrismResponse envelope, so the error code is machine-readable.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any
from weakref import WeakKeyDictionary

import orjson

from prism.auth.context import AuthContext
from prism.dispatch.dispatcher import Dispatcher
from prism.dispatch.envelope import call_from_envelope
from prism.dispatch.response import failure_envelope, success_envelope
from prism.errors import InvalidArguments, PrismError
from prism.idempotency import InvalidIdempotencyKey, Replay, ReplayedRefusal, key_from_meta
from prism.mcp_server.jsonrpc import INVALID_PARAMS, RpcError, invalid_params
from prism.registry.catalog import MEGA_TOOL_CATEGORY, all_tools
from prism.registry.mega_tools import LEGACY_BINDINGS, LEGACY_TOOLS, mega_tool_of
from prism.registry.registry import Registry
from prism.registry.visibility import visible_handlers

TITLES = {
    "entity_crud": "Business records",
    "workflow_action": "Workflow actions",
    "report_query": "Reports",
    "smart_action": "Smart actions",
    "agent_command": "Agent commands",
    "integration_call": "Integrations",
    "document_op": "Documents",
    "config_manage": "Configuration",
    "notification_send": "Notifications",
    "mission_control": "Missions",
    "governance_review": "Governance review",
    "audit_query": "Audit ledger",
    "knowledge_query": "Knowledge base",
    "prism_whoami": "Who am I",
    "prism_introspect": "Explore Prism",
}


# In the `_meta` of a tools/call result that repeats the first answer of its idempotency key.
REPLAYED_META = "idempotentReplayed"

_LISTS: WeakKeyDictionary[Registry, dict[tuple[frozenset[str], tuple[str, ...]], list[dict[str, Any]]]] = (
    WeakKeyDictionary())


def list_tools(registry: Registry, auth: AuthContext) -> list[dict[str, Any]]:
    """Every tool this caller may call, as MCP tool descriptors, sorted by name; built once per grant."""
    grant = (auth.scopes, auth.permissions.patterns)
    lists = _LISTS.setdefault(registry, {})
    hit = lists.get(grant)
    if hit is None:
        hit = lists[grant] = _build_list(registry, auth)
    return hit


def _build_list(registry: Registry, auth: AuthContext) -> list[dict[str, Any]]:
    visible = visible_handlers(registry, auth)
    tools = []
    for entry in all_tools(registry, auth):
        name = entry["name"]
        if entry["category"] == MEGA_TOOL_CATEGORY:
            mega_tool = mega_tool_of(name)
            handlers = [h for h in visible if h.coordinate.mega_tool == mega_tool]
            key = mega_tool or name
        else:
            bound = LEGACY_BINDINGS[name]
            handlers = [h for h in visible if h.path == bound]
            key = name
        read_only = all(h.read_only for h in handlers)
        title = TITLES.get(key, name)
        tools.append({
            "name": name,
            "title": title,
            "description": entry["description"],
            "inputSchema": _object_schema(entry["parameters"]),
            "annotations": {
                "title": title,
                "readOnlyHint": read_only,
                "destructiveHint": (not read_only) and any(h.destructive for h in handlers),
                "idempotentHint": read_only,
                "openWorldHint": False,
            },
        })
    return tools


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # MCP requires an object schema at the top; handler schemas already are, this only guarantees it.
    return schema if schema.get("type") == "object" else {"type": "object", **schema}


def page(tools: list[dict[str, Any]], cursor: Any, size: int) -> dict[str, Any]:
    """One page of tools; `nextCursor` is present while more follow. Cursors are opaque to clients."""
    start = _offset(cursor)
    chunk = tools[start:start + size]
    out: dict[str, Any] = {"tools": chunk}
    if start + size < len(tools):
        out["nextCursor"] = base64.urlsafe_b64encode(f"o:{start + size}".encode()).decode()
    return out


def _offset(cursor: Any) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str):
        try:
            text = base64.urlsafe_b64decode(cursor.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            text = ""
        if text.startswith("o:") and text[2:].isdigit():
            return int(text[2:])
    raise RpcError(INVALID_PARAMS, "cursor: not a cursor this server issued", data={"error": "invalid_cursor"})


def is_known_tool(name: str) -> bool:
    return mega_tool_of(name) is not None or name in LEGACY_TOOLS


async def call_tool(dispatcher: Dispatcher, auth: AuthContext, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise invalid_params(InvalidArguments("name: required, the tool to call", field="name"))
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise invalid_params(InvalidArguments("arguments: must be a JSON object", field="arguments"))
    try:
        key = key_from_meta(params)
    except InvalidIdempotencyKey as exc:
        raise invalid_params(exc) from None
    try:
        call = call_from_envelope(name, arguments or {}, door="mcp")
        call.idempotency_key = key
        _, data = await dispatcher.dispatch(auth, call)
    except PrismError as exc:
        if exc.code == "tool_not_found" and not is_known_tool(name):
            # The specification makes an unknown tool a protocol error; the refusal is in the ledger already.
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}", data={"error": "tool_not_found"}) from None
        return _replayed(error_result(exc, name)) if isinstance(exc, ReplayedRefusal) else error_result(exc, name)
    if type(data) is Replay:
        return _replayed(_success_result(data.data, name))
    return _success_result(data, name)


def _success_result(data: Any, tool_name: str) -> dict[str, Any]:
    text = orjson.dumps(success_envelope(data, tool_name), option=orjson.OPT_NON_STR_KEYS)
    return {"content": [{"type": "text", "text": text.decode()}], "isError": False}


def _replayed(result: dict[str, Any]) -> dict[str, Any]:
    """A result repeated for an idempotency key says so, as HTTP doors do with Idempotent-Replayed."""
    return {**result, "_meta": {REPLAYED_META: True}}


def error_result(exc: PrismError, tool_name: str) -> dict[str, Any]:
    text = orjson.dumps(failure_envelope(exc, tool_name), option=orjson.OPT_NON_STR_KEYS).decode()
    return {"content": [{"type": "text", "text": text}], "isError": True}
