"""The registry: every handler by coordinate, indexed for the doors and for introspection."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from prism.registry.declare import HandlerApp
from prism.registry.fast_schema import fast_model_schema
from prism.registry.model import Coordinate, Handler

if TYPE_CHECKING:
    from prism.registry.visibility import Views

ENTRY_POINT_GROUP = "prism.apps"


class Registry:
    def __init__(self) -> None:
        self._by_path: dict[str, Handler] = {}
        # mega_tool -> app -> entity -> operation -> Handler, in declaration order.
        self.tree: dict[str, dict[str, dict[str, dict[str, Handler]]]] = {}
        self.apps: dict[str, HandlerApp] = {}
        self.frozen = False
        # Which handlers each recent grant sees (registry.visibility): an attribute, not a side table, because
        # every listing and descriptor request reads it.
        self.visibility_memo: Views | None = None
        # organization id -> the imported integrations it has enabled (prism.integrations.runtime replaces it
        # whole when a connection changes; every cache keyed by a grant includes the organization's set).
        self.enablement: dict[str, frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self._by_path)

    def __iter__(self) -> Iterator[Handler]:
        return iter(self._by_path.values())

    def add_app(self, app: HandlerApp) -> None:
        if self.frozen:
            raise RuntimeError("registry is frozen")
        self.apps.setdefault(app.name, app)
        for handler in app.handlers:
            self.add(handler)

    def add(self, handler: Handler) -> None:
        if self.frozen:
            raise RuntimeError("registry is frozen")
        c = handler.coordinate
        if c.path in self._by_path:
            raise ValueError(f"handler {c.path} declared twice")
        self._by_path[c.path] = handler
        self.tree.setdefault(c.mega_tool, {}).setdefault(c.app, {}).setdefault(c.entity, {})[
            c.operation] = handler

    def freeze(self) -> Registry:
        """Generate every parameter schema once, at start-up; the doors then only read."""
        # Many handlers share a parameter model (list, read, delete ...): generate each schema once.
        schemas: dict[type[Any], dict[str, Any]] = {}
        for handler in self._by_path.values():
            if handler.schema:  # given with the handler (an imported operation's), or frozen before
                continue
            schema = schemas.get(handler.params)
            if schema is None:
                generated = fast_model_schema(handler.params) or handler.params.model_json_schema()
                schema = schemas[handler.params] = _clean_schema(generated)
            handler.schema = schema
            if handler.result is not None:
                handler.result_schema = _clean_schema(handler.result.model_json_schema(mode="serialization"))
        self.frozen = True
        return self

    def get(self, coordinate: Coordinate) -> Handler | None:
        return self._by_path.get(coordinate.path)

    def get_path(self, path: str) -> Handler | None:
        return self._by_path.get(path)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def load_app(spec: str) -> HandlerApp:
    """`package.module` (its `app` attribute) or `package.module:attribute`."""
    module_name, _, attribute = spec.partition(":")
    module = importlib.import_module(module_name)
    app = getattr(module, attribute or "app")
    if not isinstance(app, HandlerApp):
        raise TypeError(f"{spec} is not a HandlerApp")
    return app


def build_registry(extra_specs: Iterable[str] = (), *, include_entry_points: bool = True) -> Registry:
    from prism.apps import BUILTIN_APP_MODULES

    registry = Registry()
    specs = list(BUILTIN_APP_MODULES)
    if include_entry_points:
        specs += [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)]
    specs += [s.strip() for s in extra_specs if s.strip()]
    for spec in dict.fromkeys(specs):
        registry.add_app(load_app(spec))
    return registry.freeze()
