"""Prism's app with handlers a test adds to the built-in ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette

from prism.app import create_app
from prism.apps import BUILTIN_APP_MODULES
from prism.config import Settings
from prism.registry import HandlerApp, Registry
from prism.registry.registry import load_app


@asynccontextmanager
async def running_app_with(settings: Settings, *extra: HandlerApp) -> AsyncIterator[Starlette]:
    """The app with the built-in apps and `extra`, between its start-up and its shutdown."""
    registry = Registry()
    for spec in BUILTIN_APP_MODULES:
        registry.add_app(load_app(spec))
    for app in extra:
        registry.add_app(app)
    application = create_app(settings, registry=registry.freeze())
    async with application.router.lifespan_context(application):
        yield application
