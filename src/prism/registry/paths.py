"""The tree a caller sees, and how two of its nodes connect.

Nodes are the levels of the handler tree — mega-tool, app under a mega-tool, entity under a mega-tool,
operation — plus two shared nodes that tie the mega-tools together: an app (`finance`) and an entity
of an app (`finance/invoice`) are the same thing whichever mega-tool reaches them. So
`entity_crud/finance/invoice/list` and `report_query/finance/invoice/agingApSummary` connect through
the shared entity `finance/invoice`, not only through the top of the tree.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal
from weakref import WeakKeyDictionary

from prism.errors import InvalidArguments, NotFound
from prism.kit.lru import LRU
from prism.registry.mega_tools import MEGA_TOOLS
from prism.registry.model import Handler
from prism.registry.registry import Registry

NodeKind = Literal["mega_tool", "app", "entity", "operation", "shared_app", "shared_entity"]
Node = tuple[str, ...]  # (kind, *names): ("entity", "entity_crud", "finance", "invoice")

Tree = dict[str, dict[str, dict[str, list[Handler]]]]


@dataclass
class TreeView:
    """What one grant may call, grouped once: mega-tool → app → entity → handlers, and the shared nodes."""

    handlers: tuple[Handler, ...]
    tree: Tree = field(default_factory=dict)
    by_path: dict[str, Handler] = field(default_factory=dict)
    app_megas: dict[str, list[str]] = field(default_factory=dict)
    app_entities: dict[str, list[str]] = field(default_factory=dict)
    entity_megas: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    entity_apps: dict[str, list[str]] = field(default_factory=dict)
    # Unnarrowed answers that only depend on the view (stats), computed once.
    memo: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for h in self.handlers:
            c = h.coordinate
            self.by_path[c.path] = h
            apps = self.tree.setdefault(c.mega_tool, {})
            if c.app not in apps:
                self.app_megas.setdefault(c.app, []).append(c.mega_tool)
            entities = apps.setdefault(c.app, {})
            if c.entity not in entities:
                megas = self.entity_megas.setdefault((c.app, c.entity), [])
                if not megas:
                    self.app_entities.setdefault(c.app, []).append(c.entity)
                    self.entity_apps.setdefault(c.entity, []).append(c.app)
                megas.append(c.mega_tool)
            entities.setdefault(c.entity, []).append(h)
        # Mega-tools in their declared order, whatever order the handlers came in.
        order = {m: i for i, m in enumerate(MEGA_TOOLS)}
        self.tree = dict(sorted(self.tree.items(), key=lambda kv: order.get(kv[0], len(order))))


# Tree views kept per registry, one per distinct visible tuple, and at most this many handlers in all of them: a view
# costs about 100 bytes a handler (1 MB at 10,000), so a few dozen large views are kept (~40 MB), not 256 (a
# quarter of a GB when OAuth clients choose their scopes so that each grant sees a different large surface).
TREE_VIEWS_KEPT = 256
TREE_VIEW_HANDLERS_KEPT = 400_000
_VIEWS: WeakKeyDictionary[Registry, LRU[int, tuple[tuple[Handler, ...], TreeView]]] = WeakKeyDictionary()


def tree_view(registry: Registry, visible: tuple[Handler, ...]) -> TreeView:
    """One view per distinct visible tuple (memoised per grant upstream); the tuple is kept alive
    beside its view so that its id cannot be reused while cached."""
    views = _VIEWS.get(registry)
    if views is None:
        views = _VIEWS.setdefault(registry, LRU(TREE_VIEWS_KEPT, max_weight=TREE_VIEW_HANDLERS_KEPT,
                                                weigh=lambda kept: len(kept[0])))
    hit = views.get(id(visible))
    if hit is not None and hit[0] is visible:
        return hit[1]
    view = TreeView(visible)
    views.put(id(visible), (visible, view))
    return view


def node_id(node: Node) -> str:
    return "/".join(node[1:])


def describe_node(node: Node) -> dict[str, Any]:
    return {"node": node_id(node), "kind": node[0]}


def resolve_node(view: TreeView, raw: str, field_name: str) -> Node:
    """`entity_crud`, `entity_crud/finance`, `entity_crud/finance/invoice`, a full handler path,
    or, outside the mega-tools, an app (`finance`), an app's entity (`finance/invoice`) or a bare
    entity name (`invoice`, when only one app has it)."""
    text = raw.strip().strip("/")
    for prefix, kind in (("app:", "shared_app"), ("entity:", "shared_entity")):
        if text.startswith(prefix):
            return _shared(view, kind, text[len(prefix):], raw, field_name)
    parts = text.split("/") if text else []
    if parts and parts[0] in MEGA_TOOLS and all(parts):
        node = _tree_node(view, parts)
        if node is not None:
            return node
        raise _not_found(raw, field_name)
    return _shared(view, "", text, raw, field_name)


def _tree_node(view: TreeView, parts: list[str]) -> Node | None:
    apps = view.tree.get(parts[0])
    if apps is None or len(parts) > 4:
        return None
    if len(parts) == 1:
        return ("mega_tool", parts[0])
    entities = apps.get(parts[1])
    if entities is None:
        return None
    if len(parts) == 2:
        return ("app", *parts)
    handlers = entities.get(parts[2])
    if handlers is None:
        return None
    if len(parts) == 3:
        return ("entity", *parts)
    return ("operation", *parts) if any(h.coordinate.operation == parts[3] for h in handlers) else None


def _shared(view: TreeView, kind: str, text: str, raw: str, field_name: str) -> Node:
    parts = text.split("/") if text else []
    if len(parts) == 2 and kind != "shared_app" and tuple(parts) in view.entity_megas:
        return ("shared_entity", *parts)
    if len(parts) == 1 and kind != "shared_entity" and parts[0] in view.app_megas:
        return ("shared_app", parts[0])
    if len(parts) == 1 and kind != "shared_app" and parts[0] in view.entity_apps:
        apps = view.entity_apps[parts[0]]
        if len(apps) == 1:
            return ("shared_entity", apps[0], parts[0])
        raise InvalidArguments(f"{field_name}: entity {parts[0]!r} exists in several apps; name one of "
                               f"{', '.join(f'{a}/{parts[0]}' for a in apps)}", code="ambiguous_node",
                               details={"field": field_name, "candidates": [f"{a}/{parts[0]}" for a in apps]})
    raise _not_found(raw, field_name)


def _not_found(raw: str, field_name: str) -> NotFound:
    return NotFound(f"{field_name}: no node {raw!r} among the handlers this credential may call; nodes are "
                    "coordinate prefixes (entity_crud, entity_crud/finance, entity_crud/finance/invoice, "
                    "entity_crud/finance/invoice/list) or an app or app/entity name",
                    code="node_not_found", field=field_name)


def _neighbours(view: TreeView, node: Node) -> list[tuple[str, Node]]:
    """Edges as (kind, node); `parent`/`child` follow the tree, `shared_*` cross between mega-tools."""
    kind = node[0]
    if kind == "mega_tool":
        return [("child", ("app", node[1], a)) for a in view.tree[node[1]]]
    if kind == "app":
        _, m, a = node
        return [("parent", ("mega_tool", m)), ("shared_app", ("shared_app", a)),
                *(("child", ("entity", m, a, e)) for e in view.tree[m][a])]
    if kind == "entity":
        _, m, a, e = node
        return [("parent", ("app", m, a)), ("shared_entity", ("shared_entity", a, e)),
                *(("child", ("operation", m, a, e, h.coordinate.operation)) for h in view.tree[m][a][e])]
    if kind == "operation":
        return [("parent", ("entity", *node[1:4]))]
    if kind == "shared_app":
        a = node[1]
        return [*(("shared_app", ("app", m, a)) for m in view.app_megas[a]),
                *(("child", ("shared_entity", a, e)) for e in view.app_entities[a])]
    _, a, e = node
    return [("parent", ("shared_app", a)), *(("shared_entity", ("entity", m, a, e)) for m in view.entity_megas[(a, e)])]


def capability_path(view: TreeView, from_raw: str, to_raw: str) -> dict[str, Any]:
    start = resolve_node(view, from_raw, "from_node")
    goal = resolve_node(view, to_raw, "to_node")
    came: dict[Node, tuple[Node, str] | None] = {start: None}
    queue = deque([start])
    # Breadth-first: every edge costs one hop, so the first arrival is a shortest path.
    while queue and goal not in came:
        node = queue.popleft()
        for edge, nxt in _neighbours(view, node):
            if nxt not in came:
                came[nxt] = (node, edge)
                queue.append(nxt)
    base: dict[str, Any] = {"dimension": "capability_path", "from": describe_node(start), "to": describe_node(goal)}
    if goal not in came:
        return {**base, "connected": False, "hops": None, "path": [],
                "explanation": f"{node_id(start)} and {node_id(goal)} share no mega-tool, app or entity "
                               "among the handlers this credential may call."}
    steps: list[dict[str, Any]] = []
    node = goal
    while True:
        link = came[node]
        step = describe_node(node)
        if link is not None:
            step["via"] = link[1]
        steps.append(step)
        if link is None:
            break
        node = link[0]
    steps.reverse()
    crossings = [steps[i]["node"] for i in range(1, len(steps) - 1) if _crosses(steps[i - 1], steps[i + 1])]
    return {**base, "connected": True, "hops": len(steps) - 1, "path": steps, "crossings": crossings,
            "explanation": _explain(steps, crossings)}


def _crosses(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A shared node between tree nodes of two different mega-tools is where the path changes tree."""
    if before["kind"].startswith("shared_") or after["kind"].startswith("shared_"):
        return False
    return bool(str(before["node"]).split("/")[0] != str(after["node"]).split("/")[0])


def _explain(steps: list[dict[str, Any]], crossings: list[str]) -> str:
    first, last = steps[0]["node"], steps[-1]["node"]
    if len(steps) == 1:
        return f"{first} is the same node as {last}."
    route = " → ".join(s["node"] for s in steps)
    if crossings:
        return (f"{route}: the path crosses between mega-tools at {', '.join(crossings)}, "
                "the same app or entity reached from different mega-tools.")
    top = min(steps, key=lambda s: s["node"].count("/"))
    return f"{route}: both sit under {top['node']}."
