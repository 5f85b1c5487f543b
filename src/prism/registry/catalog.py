"""The tool catalog: the wire tools a caller may call (`prism_<mega_tool>` doors and legacy tools)."""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from pydantic import Field

from prism.auth.context import AuthContext
from prism.kit.lru import LRU
from prism.kit.paging import Paging, page_of
from prism.registry.mega_tools import LEGACY_BINDINGS, LEGACY_TOOLS, MEGA_TOOLS, tool_name
from prism.registry.model import Handler
from prism.registry.registry import Registry
from prism.registry.visibility import view_of

# Catalogs kept per registry, one per distinct view (visibility.View.key): a few KB each.
CATALOGS_KEPT = 64
CATALOGS: WeakKeyDictionary[Registry, LRU[str, list[dict[str, Any]]]] = WeakKeyDictionary()
MEGA_TOOL_CATEGORY = "mega_tool"
LEGACY_CATEGORY = "utility"


def envelope_schema(mega_tool: str, handlers: list[Handler]) -> dict[str, Any]:
    apps = sorted({h.coordinate.app for h in handlers})
    entities = sorted({h.coordinate.entity for h in handlers})
    operations = sorted({h.coordinate.operation for h in handlers})
    return {
        "type": "object",
        "properties": {
            "app": {"type": "string", "enum": apps, "description": "App namespace."},
            "entity": {"type": "string", "enum": entities, "description": "Entity within the app."},
            "operation": {"type": "string", "enum": operations, "description": "Operation on the entity."},
            "arguments": {"type": "object", "description":
                          f"The handler's parameters; see introspect dimension=schema for {mega_tool}."},
        },
        "required": ["app", "entity", "operation"],
        "additionalProperties": False,
    }


def _describe(mega_tool: str, handlers: list[Handler]) -> str:
    apps = sorted({h.coordinate.app for h in handlers})
    return f"{MEGA_TOOLS[mega_tool]} {len(handlers)} operations across apps: {', '.join(apps)}."


class CatalogQuery(Paging):
    """The catalog's query: SPEC's `category` and `search`, and the paging every list takes. Another parameter is
    refused, as Params refuses any (a misspelt filter must not answer the whole catalog)."""

    category: str | None = Field(None, description="Only tools of this category.")
    search: str | None = Field(None, description="Case-insensitive substring of tool names.")


def tool_catalog(registry: Registry, auth: AuthContext, query: CatalogQuery | None = None) -> dict[str, Any]:
    """One page of the tools this grant may call: the list envelope, and SPEC's `{tools, count}` for the same
    page and total."""
    query = query or CatalogQuery()
    tools = all_tools(registry, auth)
    if query.category:
        tools = [t for t in tools if t["category"] == query.category]
    if query.search:
        needle = query.search.lower()
        tools = [t for t in tools if needle in t["name"].lower()]
    listed = page_of(tools, query)
    return {**listed, "tools": listed["items"], "count": listed["total"]}


def all_tools(registry: Registry, auth: AuthContext) -> list[dict[str, Any]]:
    """Every tool this caller may call, built once per view (it depends on nothing else)."""
    view = view_of(registry, auth)
    catalogs = CATALOGS.get(registry)
    if catalogs is None:
        catalogs = CATALOGS.setdefault(registry, LRU(CATALOGS_KEPT))
    hit = catalogs.get(view.key)
    if hit is not None:
        return hit
    visible = view.handlers
    by_mega: dict[str, list[Handler]] = {}
    for handler in visible:
        by_mega.setdefault(handler.coordinate.mega_tool, []).append(handler)
    tools: list[dict[str, Any]] = []
    for mega_tool, handlers in by_mega.items():
        tools.append({"name": tool_name(mega_tool), "description": _describe(mega_tool, handlers),
                      "category": MEGA_TOOL_CATEGORY, "parameters": envelope_schema(mega_tool, handlers),
                      "handler_count": len(handlers)})
    visible_paths = {h.path for h in visible}
    for name, description in LEGACY_TOOLS.items():
        bound = registry.get_path(LEGACY_BINDINGS[name])
        if bound is not None and bound.path in visible_paths:
            tools.append({"name": name, "description": description, "category": LEGACY_CATEGORY,
                          "parameters": bound.schema})
    tools.sort(key=lambda t: t["name"])
    return catalogs.put(view.key, tools)
