"""Apps with real (or chosen) rate limits for the limit tests; the shared app of conftest runs unthrottled."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.applications import Starlette

from prism.app import create_app
from prism.config import Settings


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@asynccontextmanager
async def limited_app(base: Settings, shared: Any, **limits: Any) -> AsyncIterator[Starlette]:
    """A fresh app (fresh counters) on the test database, with the SPEC.md ceilings unless `limits` says otherwise."""
    defaults = Settings(database_url=base.database_url)
    values = {name: getattr(defaults, name) for name in type(defaults).model_fields
              if name.startswith(("rate_limit_", "lockout_"))}
    settings = base.model_copy(update={**values, **limits})
    app = create_app(settings, registry=shared.state.registry)
    async with app.router.lifespan_context(app):
        yield app


def client_for(app: Starlette, address: str = "203.0.113.10") -> httpx.AsyncClient:
    """A client whose requests come from `address` (the peer address the limits count)."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")
