"""Registries for the capability-search tests: the built-in handlers (built once) plus test integrations, each app's
handlers marked as an imported integration of its name, as prism.integrations.runtime assembles a served registry."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from prism.registry import HandlerApp
from prism.registry.registry import Registry, build_registry


@cache
def built_in() -> Registry:
    return build_registry()


def with_integrations(*apps: HandlerApp) -> Registry:
    """The built-in handlers, then each app's as the integration of its name; frozen."""
    base = built_in()
    registry = Registry()
    for handler in base:
        registry.add(handler)
    registry.apps.update(base.apps)
    for app in apps:
        registry.apps[app.name] = app
        for handler in app.handlers:
            registry.add(replace(handler, integration=app.name))
    return registry.freeze()
