"""A request without a credential on the API paths is counted before the edge looks its tenant subdomain up: an
address over its anonymous ceiling, or locked out, is refused 429 without a database read and without an entry in
the authenticator's tenant cache, however many new subdomains it names. Before, those paths authenticated first, so
each such request cost a read and pushed real tenants out of the cache. An address within its window still learns
that a subdomain has no tenant (404), and a credential is still checked against its tenant host first."""

from __future__ import annotations

from typing import Any

import pytest

from prism.config import Settings
from tests.factories import Factory
from tests.limits_support import client_for, limited_app

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _count_reads(limited: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many sessions the authenticator opens from now on (each tenant lookup opens one); they still run."""
    db = limited.state.authenticator.db
    reads = {"n": 0}
    original = db.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads["n"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(db, "read", counted)
    return reads


def _cached(limited: Any, subdomains: list[str]) -> list[str]:
    """Those of `subdomains` the authenticator's tenant cache holds."""
    return [sub for sub in subdomains if limited.state.authenticator._tenants.get(sub) is not None]


async def test_a_throttled_address_is_refused_before_any_tenant_lookup(
        settings: Settings, app: object, monkeypatch: pytest.MonkeyPatch) -> None:
    async with limited_app(settings, app, rate_limit_anonymous=3) as limited, \
            client_for(limited, "203.0.113.91") as client:
        for _ in range(3):
            assert (await client.get("/api/v1/dev/ping/")).status_code == 200
        reads = _count_reads(limited, monkeypatch)
        for i in range(20):
            answer = await client.get("/api/v1/dev/me/", headers={"Host": f"nosuch{i}t.localhost"})
            assert answer.status_code == 429 and answer.json()["error"] == "rate_limited", answer.text
            answer = await client.get("/api/mcp/tools/", headers={"Host": f"nosuch{i}u.localhost"})
            assert answer.status_code == 429, answer.text
        assert reads["n"] == 0
        assert _cached(limited, [f"nosuch{i}{x}" for i in range(20) for x in "tu"]) == []


async def test_a_locked_out_address_is_refused_before_any_tenant_lookup(
        settings: Settings, app: object, factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app) as limited, client_for(limited, "203.0.113.92") as client:
        bad = {"Authorization": "Bearer ck_" + "t" * 40, "Host": ws.host}
        assert [(await client.get("/api/v1/dev/me/", headers=bad)).status_code for _ in range(10)] == [401] * 10
        reads = _count_reads(limited, monkeypatch)
        for i in range(20):
            answer = await client.post("/api/mcp/sse", json=PING, headers={"Host": f"nosuch{i}v.localhost"})
            assert answer.status_code == 429 and "too_many_failed_attempts" in answer.text, answer.text
            answer = await client.get("/api/v1/dev/me/", headers={"Host": f"nosuch{i}w.localhost"})
            assert answer.status_code == 429 and answer.json()["error"] == "too_many_failed_attempts"
        assert reads["n"] == 0
        assert _cached(limited, [f"nosuch{i}{x}" for i in range(20) for x in "vw"]) == []


async def test_within_its_window_an_address_still_learns_a_subdomain_has_no_tenant(
        settings: Settings, app: object, factory: Factory) -> None:
    """The order of the answers is kept: no credential on an unknown subdomain is 404 tenant_not_found (counted),
    on a real one 401 authentication_required; a valid key on an unknown subdomain is 404 too, never a failure."""
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app, lockout_failures=2) as limited, \
            client_for(limited, "203.0.113.93") as client:
        missing = await client.get("/api/v1/dev/me/", headers={"Host": "nosuchx1.localhost"})
        assert missing.status_code == 404 and missing.json()["error"] == "tenant_not_found", missing.text
        bare = await client.get("/api/v1/dev/me/", headers={"Host": ws.host})
        assert bare.status_code == 401 and bare.json()["error"] == "authentication_required", bare.text
        on_mcp = await client.post("/api/mcp/sse", json=PING, headers={"Host": "nosuchx2.localhost"})
        assert on_mcp.status_code == 404 and "tenant_not_found" in on_mcp.text, on_mcp.text
        key = ws.headers("member")["Authorization"]
        for sub in ("nosuchx3", "nosuchx4", "nosuchx5"):  # more than the threshold: none counted as a failure
            answer = await client.get("/api/v1/dev/me/", headers={"Authorization": key, "Host": f"{sub}.localhost"})
            assert answer.status_code == 404 and answer.json()["error"] == "tenant_not_found", answer.text
        assert (await client.get("/api/v1/dev/me/", headers=ws.headers("member"))).status_code == 200
