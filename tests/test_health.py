"""/healthz and /readyz: on every host, never limited or locked out, and /readyz turns 503 with the failing
check named when the database, its schema or Redis is not ready (a webhook backlog only degrades it:
tests/test_health_webhook_backlog.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis

from prism.config import Settings
from prism.migrate import upgrade
from tests.factories import Factory
from tests.limits_support import client_for, limited_app, private_redis
from tests.processes import free_port


async def test_probes_are_never_limited_nor_locked_out(settings: Settings, app: Any) -> None:
    async with limited_app(settings, app, lockout_failures=1) as limited, client_for(limited) as client:
        refused = await client.get("/api/v1/dev/me/", headers={"Authorization": "Bearer ck_" + "h" * 40})
        assert refused.status_code == 401
        assert (await client.get("/api/v1/dev/ping/")).status_code == 429  # the address is locked out
        statuses = [(await client.get(path)).status_code for _ in range(100) for path in ("/healthz", "/readyz")]
        assert statuses == [200] * 200


async def test_every_host_answers_both_probes(settings: Settings, app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with limited_app(settings, app) as limited, client_for(limited) as client:
        for host in ("localhost", "portal.localhost", ws.host, "no-such-tenant.localhost", "127.0.0.1"):
            alive = await client.get("/healthz", headers={"Host": host})
            assert alive.status_code == 200 and alive.json() == {"status": "ok", "checks": {}}, host
            ready = await client.get("/readyz/", headers={"Host": host})
            assert ready.status_code == 200, (host, ready.text)
            assert ready.json() == {"status": "ok", "checks": {"database": {"status": "ok"},
                                                               "webhooks": {"status": "ok"},
                                                               "migrations": {"status": "ok"}}}
            assert ready.headers["cache-control"] == "no-store"


async def test_readyz_is_503_while_the_database_is_unreachable_and_healthz_stays_200(
        settings: Settings, app: Any) -> None:
    unreachable = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/prism"
    async with limited_app(settings, app, database_url=unreachable, webhook_worker_in_process=False) as limited, \
            client_for(limited) as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503, ready.text
        checks = ready.json()["checks"]
        assert ready.json()["status"] == "unavailable"
        assert checks["database"]["status"] == checks["migrations"]["status"] == "unavailable"
        assert "127.0.0.1" not in ready.text
        assert (await client.get("/healthz")).status_code == 200


async def test_readyz_is_503_while_redis_is_down(settings: Settings, app: Any) -> None:
    async with limited_app(settings, app, redis_url=f"redis://127.0.0.1:{free_port()}/0") as limited, \
            client_for(limited) as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["redis"] == {"status": "unavailable", "detail": "LimiterUnavailable"}
        assert ready.json()["checks"]["database"] == {"status": "ok"}


@pytest.mark.parametrize("on_failure", ["open", "closed"])
async def test_readyz_follows_the_redis_failure_mode_when_redis_stops(
        settings: Settings, app: Any, tmp_path: Path, on_failure: str) -> None:
    """Failing open, Redis down is degraded but ready: every node shares the one Redis, and a 503 would take them all
    out of service. Failing closed, requests with a secret are refused, and the node is not ready."""
    with private_redis(tmp_path) as url:
        async with limited_app(settings, app, redis_url=url, rate_limit_on_redis_failure=on_failure) as limited, \
                client_for(limited) as client:
            up = await client.get("/readyz")
            assert up.status_code == 200 and up.json()["checks"]["redis"] == {"status": "ok"}, up.text
            stopper = redis.Redis.from_url(url)
            stopper.shutdown(nosave=True)  # the real server stops
            stopper.close()
            down = await client.get("/readyz")
    redis_check = down.json()["checks"]["redis"]
    if on_failure == "open":
        assert down.status_code == 200 and down.json()["status"] == "degraded", down.text
        assert redis_check["status"] == "degraded" and "not counted" in redis_check["detail"]
    else:
        assert down.status_code == 503 and down.json()["status"] == "unavailable", down.text
        assert redis_check["status"] == "unavailable"
    assert down.json()["checks"]["database"] == {"status": "ok"}


async def test_readyz_is_503_until_the_schema_is_migrated(settings: Settings, app: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    async with limited_app(settings, app, database_url=url, webhook_worker_in_process=False) as limited, \
            client_for(limited) as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["database"] == {"status": "ok"}
        assert ready.json()["checks"]["migrations"]["status"] == "unavailable"
        await asyncio.to_thread(upgrade, url)
        assert (await client.get("/readyz")).status_code == 200
