"""bench/synthetic_app.py's handler apps under `bench_`-prefixed names, loadable next to Prism's built-in apps.

Some synthetic app names (maintenance, itsm ...) are also names of built-in apps; two apps declaring the same
coordinate are refused, so the descriptor benchmark loads these renamed copies instead.

    PRISM_APPS=$(python -c "from bench.openapi_apps import specs; print(specs())")
"""

from __future__ import annotations

import dataclasses
from functools import cache

from bench.synthetic_app import APPS, configured
from prism.registry import Coordinate, HandlerApp

PREFIX = "bench_"


@cache
def renamed() -> dict[str, HandlerApp]:
    apps: dict[str, HandlerApp] = {}
    for name, app in configured().items():
        new_name = PREFIX + name
        handlers = [dataclasses.replace(h, coordinate=Coordinate(h.coordinate.mega_tool, new_name, h.coordinate.entity,
                                                                 h.coordinate.operation)) for h in app.handlers]
        apps[new_name] = HandlerApp(new_name, description=app.description, handlers=handlers)
    return apps


def specs() -> str:
    return ",".join(f"{__name__}:{PREFIX}{name}" for name in APPS)


def __getattr__(name: str) -> HandlerApp:
    if name.startswith(PREFIX) and name[len(PREFIX):] in APPS:
        return renamed()[name]
    raise AttributeError(name)
