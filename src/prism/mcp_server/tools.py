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
from prism.kit.lru import LRU
from prism.kit.numbers import whole_number
from prism.mcp_server import resources, revisions, surfaces
from prism.mcp_server.jsonrpc import INVALID_PARAMS, RpcError, invalid_params
from prism.mcp_server.outputs import output_schema
from prism.oauth.challenge import step_up_scopes
from prism.registry.catalog import MEGA_TOOL_CATEGORY, all_tools
from prism.registry.mega_tools import LEGACY_BINDINGS, LEGACY_TOOLS, mega_tool_of
from prism.registry.mega_tools import tool_name as door_name
from prism.registry.model import Handler
from prism.registry.registry import Registry
from prism.registry.visibility import view_of

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
    "prism_search": "Find the handler for a task",
}


# In a tool's `_meta` (2025-06-18 on): the mega-tool or utility it is, as in the audit ledger.
TOOL_META = "dev.prism/tool"
# In the `_meta` of a tools/call result that repeats the first answer of its idempotency key.
REPLAYED_META = "idempotentReplayed"

# Fields of a tool descriptor that revisions before 2025-06-18 do not define.
_STRUCTURED_FIELDS = ("title", "outputSchema", "_meta")
# (visibility.View.key, structured revision or not, surface); each list a few tens of KB.
_ListKey = tuple[str, bool, str]
LISTS_KEPT = 128


class ScopeChallenge(Exception):
    """A tools/call refused only for a platform scope that its OAuth token could be granted (MCP's step-up
    authorization): the transport answers 403 with the scopes to ask for (endpoints.py) instead of a tool
    result. `scopes`: those the token holds and the one it lacks, so re-authorizing loses none."""

    def __init__(self, refusal: PrismError, scopes: list[str]) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
        self.scopes = scopes
TOOL_LISTS: WeakKeyDictionary[Registry, LRU[_ListKey, list[dict[str, Any]]]] = WeakKeyDictionary()


def list_tools(registry: Registry, auth: AuthContext, version: str, surface: str = "mega") -> list[dict[str, Any]]:
    """Every tool this caller may call on `surface` (surfaces.py), as MCP tool descriptors of `version`, sorted
    by name; built once per view (what the caller sees, not the grant that shows it), surface and revision
    family."""
    structured = revisions.has_structured_output(version)
    key = (view_of(registry, auth).key, structured, surface)
    lists = TOOL_LISTS.get(registry)
    if lists is None:
        lists = TOOL_LISTS.setdefault(registry, LRU(LISTS_KEPT))
    hit = lists.get(key)
    if hit is None:
        full = _build_list(registry, auth, surface)
        hit = lists.put(key, full if structured else [
            {k: v for k, v in tool.items() if k not in _STRUCTURED_FIELDS} for tool in full])
    return hit


def _build_list(registry: Registry, auth: AuthContext, surface: str) -> list[dict[str, Any]]:
    visible = view_of(registry, auth).handlers
    tools = []
    for entry in all_tools(registry, auth):
        name = entry["name"]
        if entry["category"] == MEGA_TOOL_CATEGORY:
            mega_tool = mega_tool_of(name)
            handlers = [h for h in visible if h.coordinate.mega_tool == mega_tool]
            key = mega_tool or name
            if surface == "split" and mega_tool is not None:
                tools += [{**tool, "_meta": {TOOL_META: key}}
                          for tool in surfaces.split_tools(mega_tool, handlers, TITLES.get(key, name))]
                continue
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
            "outputSchema": output_schema(handlers),
            "_meta": {TOOL_META: key},
        })
    tools.sort(key=lambda t: t["name"])
    return tools


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # MCP requires an object schema at the top; handler schemas already are, this only guarantees it.
    return schema if schema.get("type") == "object" else {"type": "object", **schema}


def page(tools: list[dict[str, Any]], cursor: Any, size: int) -> dict[str, Any]:
    """One page of tools; `nextCursor` is present while more follow. Cursors are opaque to clients."""
    start = _offset(cursor, len(tools), size)
    chunk = tools[start:start + size]
    out: dict[str, Any] = {"tools": chunk}
    if start + size < len(tools):
        out["nextCursor"] = base64.urlsafe_b64encode(f"o:{start + size}".encode()).decode()
    return out


def _offset(cursor: Any, length: int, size: int) -> int:
    """Where the page a cursor names starts: only an offset Prism could have issued for this list (a whole page
    on, before its end) is one; any other is refused rather than read as a place nobody was sent to."""
    if cursor is None:
        return 0
    if isinstance(cursor, str):
        try:
            text = base64.urlsafe_b64decode(cursor.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            text = ""
        offset = whole_number(text[2:]) if text.startswith("o:") else None
        if offset is not None and 0 < offset < length and offset % size == 0:
            return offset
    raise RpcError(INVALID_PARAMS, "cursor: not a cursor this server issued", data={"error": "invalid_cursor"})


def is_known_tool(name: str) -> bool:
    return mega_tool_of(name) is not None or name in LEGACY_TOOLS or surfaces.variant(name) is not None


async def call_tool(dispatcher: Dispatcher, auth: AuthContext, params: dict[str, Any], version: str, *,
                    step_up: bool = False) -> dict[str, Any]:
    """The call's result. `step_up`: the request has an HTTP exchange of its own, where a scope refusal of an
    OAuth token becomes a ScopeChallenge (an API key's scopes are fixed when it is minted: it gets the tool
    error, as every refusal)."""
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
    split = surfaces.variant(name)
    try:
        if split is not None:  # a split-surface tool: its operations only, under the mega-tool's own name
            name = door_name(split[0])
        call = call_from_envelope(name, arguments or {}, door="mcp")
        if split is not None:  # the dispatcher refuses another kind, once the caller may call the operation
            call.kind = split[1]
        call.idempotency_key = key
        handler, data = await dispatcher.dispatch(auth, call)
    except PrismError as exc:
        if exc.code == "tool_not_found" and not is_known_tool(name):
            # The specification makes an unknown tool a protocol error; the refusal is in the ledger already.
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}; tools/list names the tools this credential may "
                           "call, and the prism_introspect tool describes them", data={"error": "tool_not_found"}
                           ) from None
        scopes = step_up_scopes(auth, exc) if step_up else None
        if scopes is not None:
            raise ScopeChallenge(exc, scopes) from None
        result = error_result(_pointed(exc, name, arguments), name)
        return _replayed(result) if isinstance(exc, ReplayedRefusal) else result
    structured = revisions.has_structured_output(version)
    if type(data) is Replay:
        return _replayed(_success_result(data.data, name, structured, handler))
    return _success_result(data, name, structured, handler)


def _success_result(data: Any, tool_name: str, structured: bool, handler: Handler | None) -> dict[str, Any]:
    envelope = success_envelope(data, tool_name)
    text = orjson.dumps(envelope, option=orjson.OPT_NON_STR_KEYS).decode()
    if not structured:
        return {"content": [{"type": "text", "text": text}], "isError": False}
    # 2025-06-18 on: the same envelope as structured content (the text stays for clients that read only text),
    # and a link to the document when the handler answered one.
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    link = resources.link_for(handler, data)
    if link is not None:
        content.append(link)
    return {"content": content, "structuredContent": envelope, "isError": False}


def _replayed(result: dict[str, Any]) -> dict[str, Any]:
    """A result repeated for an idempotency key says so, as HTTP doors do with Idempotent-Replayed."""
    return {**result, "_meta": {REPLAYED_META: True}}


def _pointed(exc: PrismError, name: str, arguments: Any) -> PrismError:
    """A refusal of the arguments, with where the model finds the parameters it should have sent: the
    prism_introspect tool (a REST path means nothing to a model that can only call tools)."""
    # By code, not class: a refusal replayed for an idempotency key is pointed the same way as the first.
    if exc.code != InvalidArguments.code or mega_tool_of(name) is None or not isinstance(arguments, dict):
        return exc
    parts = [arguments.get(k) for k in ("app", "entity", "operation")]
    if not all(isinstance(p, str) and p for p in parts):
        return exc
    path = "/".join([str(mega_tool_of(name)), *(str(p) for p in parts)])
    hint = f' (the prism_introspect tool with dimension="schema" and operation="{path}" lists its parameters)'
    return InvalidArguments(exc.message + hint, code=exc.code, details=exc.details)


def error_result(exc: PrismError, tool_name: str) -> dict[str, Any]:
    text = orjson.dumps(failure_envelope(exc, tool_name), option=orjson.OPT_NON_STR_KEYS).decode()
    return {"content": [{"type": "text", "text": text}], "isError": True}
