"""Apps with real (or chosen) rate limits for the limit tests; the shared app of conftest runs unthrottled."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
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
    try:
        async with app.router.lifespan_context(app):
            yield app
    finally:  # the lifespan context skips the middleware that closes the limiter on a served app's shutdown
        await app.state.rate_limiter.close()


def client_for(app: Starlette, address: str = "203.0.113.10") -> httpx.AsyncClient:
    """A client whose requests come from `address` (the peer address the limits count)."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


@contextmanager
def private_redis(tmp_dir: Path) -> Iterator[str]:
    """A redis-server of the test's own on a free port (its URL): exact command counts, and free to stop."""
    from tests.processes import free_port

    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_dir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        probe = redis.Redis.from_url(url, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"redis-server on port {port} did not start") from None
                time.sleep(0.05)
        probe.close()
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


class RoundTrips:
    """Round trips a Redis has served, from its own statistics: one reply written per command a client sent.

    Commands a Lua script runs inside Redis are not replies (commandstats would count them too). Each reading
    costs one round trip of its own, which `since` takes off."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.mark = self._replies()

    def _replies(self) -> int:
        return int(self.client.info("stats")["total_writes_processed"])

    def since(self) -> int:
        """Round trips served since the last reading (or the counter's start)."""
        replies = self._replies()
        served, self.mark = replies - self.mark - 1, replies
        return served

    def close(self) -> None:
        self.client.close()


# One Redis database for the lockout tests' apps. Never flushed: bin/test runs its SQLite and PostgreSQL passes at
# once against one Redis, so every test counts from addresses of its own instead.
LOCKOUT_REDIS_URL = "redis://127.0.0.1:6379/11"


@pytest.fixture(name="limiter_storage", params=["memory", "redis"])
def limiter_storage_fixture(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The settings of the limiter's storage an app runs with: memory, then Redis (skipped when it is not there)."""
    if request.param == "memory":
        return {}
    try:
        redis.Redis.from_url(LOCKOUT_REDIS_URL, socket_connect_timeout=1).ping()
    except redis.RedisError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    return {"redis_url": LOCKOUT_REDIS_URL}
