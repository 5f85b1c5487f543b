"""Introspection of the handler tree, limited to what the caller may call.

Every dimension starts from `visible_handlers` (memoised per grant) and its grouped `TreeView`
(memoised per visible tuple), so a handler the caller may not call is never counted, listed,
searched or described — the answers of two keys differ only by what each may do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from difflib import get_close_matches
from typing import Any, Literal

from pydantic import Field, field_validator

from prism.auth.context import AuthContext
from prism.errors import InvalidArguments, NotFound, ToolNotFound
from prism.kit.paging import Paging, page_of
from prism.registry.answer import SearchParams, capability_answer
from prism.registry.guide import guide
from prism.registry.mega_tools import LEGACY_BINDINGS, LEGACY_TOOLS, MEGA_TOOLS, SCOPE_OF_CLASS, tool_name
from prism.registry.model import Handler
from prism.registry.paths import Tree, TreeView, capability_path, tree_view
from prism.registry.registry import Registry
from prism.registry.schema_reading import keywords_of, list_of, mapping_of
from prism.registry.search import split_words
from prism.registry.visibility import enabled_integrations, visible_handlers

Dimension = Literal["mega_tools", "apps", "entities", "operations", "schema", "stats", "handlers",
                    "capability_search", "capability_path", "guide"]

# An unnarrowed `operations` answer over thousands of handlers would be megabytes; `handlers` pages.
OPERATIONS_CAP = 1000


class IntrospectParams(Paging):
    dimension: Dimension = Field("mega_tools", description="What to describe; default mega_tools.")
    mega_tool: str | None = Field(None, max_length=64, description="Narrow to one mega-tool, e.g. entity_crud.")
    app: str | None = Field(None, max_length=64, description="Narrow to one app namespace.")
    entity: str | None = Field(None, max_length=64, description="Narrow to one entity.")
    operation: str | None = Field(None, max_length=255, description="The operation (schema); a full path works.")
    query: str | None = Field(None, max_length=500, description="Plain-language task (capability_search).")
    rerank: bool = Field(True, description="capability_search: the finer ranking pass (semantic, with the "
                                           "embedding model; `ranker` in the answer says which ran); false for "
                                           "the first pass alone.")
    from_node: str | None = Field(None, max_length=255, description="capability_path: where to start.")
    to_node: str | None = Field(None, max_length=255, description="capability_path: where to arrive.")
    topic: str | None = Field(None, max_length=64, description="guide: the topic; none for the overview.")
    limit: int = Field(10, ge=1, le=100, description="Results (capability_search); with handlers, a former name "
                                                    "of page_size.")

    @field_validator("mega_tool", "app", "entity", "operation", "query", "from_node", "to_node", "topic",
                     mode="before")
    @classmethod
    def _blank_is_absent(cls, value: object) -> object:
        # `?app=&dimension=apps` from a form or a shell variable left empty means "no filter".
        return None if isinstance(value, str) and not value.strip() else value


def introspect(registry: Registry, auth: AuthContext, params: IntrospectParams) -> dict[str, Any]:
    view = tree_view(registry, visible_handlers(registry, auth))
    dimension = params.dimension
    if dimension == "capability_search":
        return _capability_search(registry, view, enabled_integrations(registry, auth), params)
    if dimension == "capability_path":
        return capability_path(view, _required(params, "from_node"), _required(params, "to_node"))
    if dimension == "guide":
        return guide(params.topic, view, auth, recipe)
    if dimension == "stats":
        return _stats(view, params, existing=_existing(registry, enabled_integrations(registry, auth)))
    return _TREE_DIMENSIONS[dimension](registry, view, params)


def _required(p: IntrospectParams, name: str) -> str:
    value = getattr(p, name)
    if not isinstance(value, str):
        raise InvalidArguments(f"{name}: required with dimension={p.dimension}", field=name)
    return value


# ---- narrowing -------------------------------------------------------------------------------

def _check_filters(view: TreeView, p: IntrospectParams) -> None:
    """Unknown names fail loudly; a name the caller cannot see is answered exactly like an unknown one."""
    if p.mega_tool is not None and p.mega_tool not in MEGA_TOOLS:
        raise NotFound(f"mega_tool: no mega-tool {p.mega_tool!r}; one of {', '.join(MEGA_TOOLS)}",
                       code="mega_tool_not_found", field="mega_tool")
    if p.app is not None and p.app not in view.app_megas:
        raise NotFound(f"app: no app {p.app!r} among the handlers this credential may call",
                       code="app_not_found", field="app")
    if p.entity is not None and p.entity not in view.entity_apps:
        raise NotFound(f"entity: no entity {p.entity!r} among the handlers this credential may call",
                       code="entity_not_found", field="entity")


def _accept(p: IntrospectParams) -> Callable[[Handler], bool] | None:
    if p.mega_tool is None and p.app is None and p.entity is None:
        return None
    m, a, e = p.mega_tool, p.app, p.entity
    return lambda h: ((m is None or h.coordinate.mega_tool == m) and (a is None or h.coordinate.app == a)
                      and (e is None or h.coordinate.entity == e))


def _narrowed(view: TreeView, p: IntrospectParams) -> list[Handler] | tuple[Handler, ...]:
    _check_filters(view, p)
    if p.mega_tool and p.app and p.entity:
        return view.tree.get(p.mega_tool, {}).get(p.app, {}).get(p.entity, [])
    accept = _accept(p)
    return view.handlers if accept is None else [h for h in view.handlers if accept(h)]


def _filters(p: IntrospectParams) -> dict[str, str]:
    return {k: v for k, v in (("mega_tool", p.mega_tool), ("app", p.app), ("entity", p.entity)) if v is not None}


# ---- shapes ----------------------------------------------------------------------------------

def describe(h: Handler) -> dict[str, Any]:
    c = h.coordinate
    return {"coordinate": c.path, "mega_tool": c.mega_tool, "app": c.app, "entity": c.entity,
            "operation": c.operation, "tool": tool_name(c.mega_tool), "description": h.description,
            "scope": h.scope, "required_scope": SCOPE_OF_CLASS[h.scope], "permission": h.permission,
            "cost": h.cost, "read_only": h.read_only, "destructive": h.destructive}


def recipe(h: Handler) -> dict[str, Any]:
    """A call that works as given once placeholders (listed in `fill`) are replaced."""
    c = h.coordinate
    arguments, fill = example_arguments(h.schema)
    tool = tool_name(c.mega_tool)
    envelope = {"app": c.app, "entity": c.entity, "operation": c.operation, "arguments": arguments}
    return {"tool": tool,
            "http": {"method": "POST", "path": f"/api/mcp/tools/{tool}/", "body": envelope},
            "prism_path": f"/prism/{c.path}",
            "sandbox": {"method": "POST", "path": "/api/v1/dev/call/", "body": {"name": tool, "arguments": envelope}},
            "fill": fill}


def example_arguments(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Values for the required parameters only: the smallest call that validates."""
    defs = mapping_of(schema, "$defs")
    props = mapping_of(schema, "properties")
    fill: list[str] = []
    out = {name: _example(name, props.get(name, {}), defs, fill, 0)
           for name in list_of(schema, "required") if isinstance(name, str)}
    return out, fill


MAX_EXAMPLE_DEPTH = 8
_FORMAT_EXAMPLES = {"date": "2025-01-31", "date-time": "2025-01-31T09:00:00Z", "email": "someone@example.com",
                    "uuid": "00000000-0000-4000-8000-000000000000", "uri": "https://example.com/"}


def _example(name: str, schema: Any, defs: dict[str, Any], fill: list[str], depth: int) -> Any:
    """An example value; `depth` counts each level followed, unions included: a `$ref` may lead back to itself
    (an upstream's schema, kept as given), and past a few levels a placeholder stands instead."""
    if depth > MAX_EXAMPLE_DEPTH:
        fill.append(name)
        return f"<{name}>"
    prop = keywords_of(schema)  # a boolean sub-schema says nothing of its value: a placeholder
    ref = prop.get("$ref")
    if isinstance(ref, str):
        prop = keywords_of(defs.get(ref.rsplit("/", 1)[-1], {}))
    for key in ("examples", "default", "const", "enum"):
        if key in prop:
            value = prop[key]
            return value[0] if key in ("examples", "enum") and isinstance(value, list) and value else value
    for key in ("anyOf", "oneOf", "allOf"):
        variants = [v for v in list_of(prop, key) if keywords_of(v).get("type") != "null"]
        if variants:
            return _example(name, variants[0], defs, fill, depth + 1)
    kind = prop.get("type")
    if kind in ("integer", "number"):
        return _number_example(prop)
    if kind == "boolean":
        return True
    if kind == "array":
        wanted = prop.get("minItems", 0)
        return ([_example(name, prop.get("items", {}), defs, fill, depth + 1)]
                if isinstance(wanted, int) and wanted > 0 and depth < 4 else [])
    if kind == "object":
        if depth >= 4:
            return {}
        required = list_of(prop, "required")
        return {k: _example(k, v, defs, fill, depth + 1) for k, v in mapping_of(prop, "properties").items()
                if k in required}
    fmt = prop.get("format")
    if fmt in _FORMAT_EXAMPLES:
        return _FORMAT_EXAMPLES[fmt]
    fill.append(name)
    return f"<{name}>"


def _number_example(prop: dict[str, Any]) -> Any:
    """The schema's minimum (past an exclusive one), capped by its maximum; 1 when it names neither (or names
    them with something other than a number)."""
    minimum, exclusive, maximum = (_number(prop.get(k)) for k in ("minimum", "exclusiveMinimum", "maximum"))
    value = minimum if minimum is not None else exclusive + 1 if exclusive is not None else 1
    return min(value, maximum) if maximum is not None else value


def _number(value: Any) -> int | float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# ---- tree dimensions ------------------------------------------------------------------------

Dim = Callable[[Registry, TreeView, IntrospectParams], dict[str, Any]]


def _mega_tools(registry: Registry, view: TreeView, p: IntrospectParams) -> dict[str, Any]:
    _check_filters(view, p)
    tree: Tree
    if p.app is None and p.entity is None:
        tree = view.tree if p.mega_tool is None else {p.mega_tool: view.tree.get(p.mega_tool, {})}
    else:  # which mega-tools reach this app or entity
        tree = {}
        for h in _narrowed(view, p):
            c = h.coordinate
            tree.setdefault(c.mega_tool, {}).setdefault(c.app, {}).setdefault(c.entity, []).append(h)
    items = [{"name": m, "tool": tool_name(m), "description": MEGA_TOOLS.get(m, ""), "apps": len(apps),
              "entities": sum(len(e) for e in apps.values()),
              "handlers": sum(len(hs) for e in apps.values() for hs in e.values())}
             for m, apps in tree.items() if apps]
    utilities = [{"name": name, "description": text} for name, text in LEGACY_TOOLS.items()
                 if LEGACY_BINDINGS[name] in view.by_path]
    return {"dimension": "mega_tools", "filters": _filters(p), "total_mega_tools": len(MEGA_TOOLS),
            "count": len(items), "mega_tools": items, "utility_tools": utilities}


def _group(handlers: Iterable[Handler], key: Callable[[Handler], tuple[str, ...]]) -> dict[tuple[str, ...],
                                                                                        list[Handler]]:
    groups: dict[tuple[str, ...], list[Handler]] = {}
    for h in handlers:
        groups.setdefault(key(h), []).append(h)
    return groups


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _apps(registry: Registry, view: TreeView, p: IntrospectParams) -> dict[str, Any]:
    groups = _group(_narrowed(view, p), lambda h: (h.coordinate.app,))
    items = []
    for (app,), hs in groups.items():
        declared = registry.apps.get(app)
        items.append({"name": app, "description": declared.description if declared else "",
                      "mega_tools": _unique(h.coordinate.mega_tool for h in hs),
                      "entities": len({h.coordinate.entity for h in hs}), "handlers": len(hs)})
    return {"dimension": "apps", "filters": _filters(p), "count": len(items), "apps": items}


def _entities(registry: Registry, view: TreeView, p: IntrospectParams) -> dict[str, Any]:
    groups = _group(_narrowed(view, p), lambda h: (h.coordinate.app, h.coordinate.entity))
    items = [{"app": app, "name": entity, "coordinate": f"{app}/{entity}",
              "mega_tools": _unique(h.coordinate.mega_tool for h in hs),
              "operations": _unique(h.coordinate.operation for h in hs), "handlers": len(hs)}
             for (app, entity), hs in groups.items()]
    return {"dimension": "entities", "filters": _filters(p), "count": len(items), "entities": items}


def _operations(registry: Registry, view: TreeView, p: IntrospectParams) -> dict[str, Any]:
    handlers = _narrowed(view, p)
    body: dict[str, Any] = {"dimension": "operations", "filters": _filters(p), "count": len(handlers),
                            "operations": [describe(h) for h in handlers[:OPERATIONS_CAP]],
                            "truncated": len(handlers) > OPERATIONS_CAP}
    if body["truncated"]:
        body["hint"] = f"showing the first {OPERATIONS_CAP}; narrow with mega_tool, app or entity, " \
                       "or page through dimension=handlers"
    return body


def _handlers(registry: Registry, view: TreeView, p: IntrospectParams) -> dict[str, Any]:
    handlers = _narrowed(view, p)
    if "limit" in p.model_fields_set and "page_size" not in p.model_fields_set:  # the former name of page_size
        p = p.model_copy(update={"page_size": p.limit})
    listed = page_of(handlers, p)
    listed["items"] = [{"coordinate": h.path, "tool": tool_name(h.coordinate.mega_tool),
                        "description": h.description, "scope": h.scope} for h in listed["items"]]
    return {"dimension": "handlers", "filters": _filters(p), **listed}


def _stats(view: TreeView, p: IntrospectParams, *, existing: int) -> dict[str, Any]:
    if not _filters(p):  # the common case, and at 10,000 handlers the only costly one: once per view
        cached = view.memo.get("stats")
        if cached is None:
            cached = view.memo["stats"] = _count(view.handlers, p, existing)
        # A view is shared by every caller who sees the same handlers, in any organization: what exists beside
        # them (`handlers_total`, the organization's enabled integrations included) is this caller's own.
        return {**cached, "filters": {}, "by_scope": dict(cached["by_scope"]),
                "by_mega_tool": dict(cached["by_mega_tool"]), "handlers_total": existing}
    return _count(_narrowed(view, p), p, existing)


def _existing(registry: Registry, enabled: frozenset[str]) -> int:
    """The handlers that exist for an organization, whatever its caller may call: every built-in one and those of
    the integrations it enabled. Another organization's imports are not counted (nor named anywhere)."""
    return sum(1 for h in registry if h.integration is None or h.integration in enabled)


def _count(handlers: Iterable[Handler], p: IntrospectParams, existing: int) -> dict[str, Any]:
    by_scope = dict.fromkeys(SCOPE_OF_CLASS, 0)
    by_mega: dict[str, int] = {}
    apps: set[str] = set()
    entities: set[tuple[str, str]] = set()
    total = destructive = 0
    for h in handlers:
        c = h.coordinate
        total += 1
        by_scope[h.scope] = by_scope.get(h.scope, 0) + 1
        by_mega[c.mega_tool] = by_mega.get(c.mega_tool, 0) + 1
        apps.add(c.app)
        entities.add((c.app, c.entity))
        destructive += h.destructive
    return {"dimension": "stats", "filters": _filters(p), "total_mega_tools": len(MEGA_TOOLS),
            "mega_tools": len(by_mega), "apps": len(apps), "entities": len(entities), "handlers": total,
            "handlers_total": existing, "by_scope": by_scope, "by_mega_tool": by_mega,
            "destructive": destructive}


def _schema(registry: Registry, view: TreeView, p: IntrospectParams) -> dict[str, Any]:
    h = find_operation(view, p)
    c = h.coordinate
    return {"dimension": "schema", "coordinate": c.path,
            "parts": {"mega_tool": c.mega_tool, "app": c.app, "entity": c.entity, "operation": c.operation},
            "tool": tool_name(c.mega_tool), "description": h.description, "examples": list(h.examples),
            "parameters": h.schema,
            "hints": {"read_only": h.read_only, "destructive": h.destructive, "cost": h.cost,
                      "category": h.category, "keywords": list(h.keywords)},
            "scope": h.scope, "required_scope": SCOPE_OF_CLASS[h.scope], "required_permission": h.permission,
            "recipe": recipe(h)}


def find_operation(view: TreeView, p: IntrospectParams) -> Handler:
    operation = _required(p, "operation").strip()
    if "/" in operation:
        exact = view.by_path.get(operation.strip("/"))
        if exact is None:
            raise ToolNotFound(f"operation: no handler {operation!r} among those this credential may call",
                               code="operation_not_found", field="operation")
        return exact
    pool = _narrowed(view, p)
    matches = [h for h in pool if h.coordinate.operation == operation]
    if not matches:
        folded = operation.lower()
        matches = [h for h in pool if h.coordinate.operation.lower() == folded]
    if len(matches) == 1:
        return matches[0]
    if matches:
        candidates = [h.path for h in matches[:50]]
        raise InvalidArguments(f"operation: {operation!r} matches {len(matches)} handlers; add mega_tool, app "
                               f"and entity to pick one (e.g. {candidates[0]})", code="ambiguous_operation",
                               details={"field": "operation", "candidates": candidates, "count": len(matches)})
    known = _unique(h.coordinate.operation for h in pool)
    close = get_close_matches(operation, known, n=5, cutoff=0.6)
    if not close:
        # Words in common catch what spelling distance misses: `aging` → agingApSummary.
        wanted = set(split_words(operation))
        close = [o for o in known if wanted & set(split_words(o))][:5]
    raise ToolNotFound(f"operation: no operation {operation!r} among the handlers this credential may call"
                       + (f"; did you mean {', '.join(close)}?" if close else ""),
                       code="operation_not_found", details={"field": "operation", "suggestions": close})


_TREE_DIMENSIONS: dict[str, Dim] = {
    "mega_tools": _mega_tools, "apps": _apps, "entities": _entities, "operations": _operations,
    "schema": _schema, "handlers": _handlers,
}


# ---- capability search ----------------------------------------------------------------------

def _capability_search(registry: Registry, view: TreeView, enabled: frozenset[str],
                       p: IntrospectParams) -> dict[str, Any]:
    query = _checked_search(view, p)
    answer = capability_answer(registry, view.handlers, enabled, query, limit=p.limit, rerank=p.rerank,
                               accept=_accept(p), with_schemas=False, recipe=recipe)
    return {"dimension": "capability_search", "query": query, "filters": _filters(p), "rerank": p.rerank, **answer}


def _checked_search(view: TreeView, p: IntrospectParams) -> str:
    """The query, once it and the filters are found acceptable (no query, a filter naming nothing the caller may
    call: refused)."""
    query = _required(p, "query").strip()
    _check_filters(view, p)
    return query


def check_search(registry: Registry, auth: AuthContext, p: IntrospectParams) -> None:
    """What a capability search refuses, without searching: for a search whose index is still being built
    (registry.search.pending)."""
    _checked_search(tree_view(registry, visible_handlers(registry, auth)), p)


def search_narrowing(p: SearchParams) -> IntrospectParams:
    """`prism_search`'s request as the capability search it runs: its query and filters."""
    return IntrospectParams(dimension="capability_search", query=p.query, mega_tool=p.mega_tool, app=p.app,
                            entity=p.entity)


def search_answer(registry: Registry, auth: AuthContext, p: SearchParams) -> dict[str, Any]:
    """`prism_search`: capability search with each result's argument schema and a filled recipe."""
    view = tree_view(registry, visible_handlers(registry, auth))
    narrowing = search_narrowing(p)
    _check_filters(view, narrowing)
    return capability_answer(registry, view.handlers, enabled_integrations(registry, auth), p.query, limit=p.limit,
                             rerank=True, accept=_accept(narrowing), with_schemas=True, recipe=recipe)
