"""GET /metrics: Prometheus text whose series move with real calls, served only to PRISM_METRICS_ALLOW addresses
or the PRISM_METRICS_TOKEN bearer, never rate-limited nor locked out."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from prism.config import Settings
from tests.factories import Factory
from tests.governance_support import governed_key, post
from tests.limits_support import client_for, limited_app
from tests.metrics_support import sample

PARTS = "entity_crud/spare_parts/spare_part/list"


async def scrape(client: httpx.AsyncClient) -> str:
    answer = await client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return answer.text


async def test_series_move_with_real_calls(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "denied", persona={"name": "deny all", "default": "deny"})
    await governed_key(factory, client, ws, "watched", persona={"name": "watched", "oversight": ["*/*/*/*"]})
    before = await scrape(client)
    assert (await post(client, ws, PARTS, {})).status_code == 200
    assert (await post(client, ws, PARTS, {}, label="denied")).status_code == 403
    assert (await post(client, ws, PARTS, {}, label="watched")).status_code == 202
    assert (await client.post("/prism/entity_crud/spare_parts/spare_part/list", headers=ws.headers(),
                              json={})).status_code == 200
    after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("prism_http_requests_total", door="rest", status_class="2xx", tool="entity_crud") == 2  # 200, 202
    assert moved("prism_http_requests_total", door="rest", status_class="4xx", tool="entity_crud") == 1
    assert moved("prism_http_requests_total", door="prism_path", status_class="2xx", tool="entity_crud") == 1
    assert moved("prism_dispatch_duration_seconds_count", door="rest") == 3
    assert moved("prism_dispatch_duration_seconds_count", door="rest", outcome="refused") == 2
    assert moved("prism_governance_decisions_total", decision="deny") == 1
    assert moved("prism_governance_decisions_total", decision="oversight") == 1
    assert moved("prism_oversight_requests_total") == 1
    assert moved("prism_ledger_batch_size_count") >= 1
    assert moved("prism_ledger_batch_size_sum") >= 4
    assert moved("prism_ledger_commit_duration_seconds_count") >= 1
    assert moved("prism_http_requests_total", door="metrics", status_class="2xx", tool="none") == 1
    assert "prism_webhook_queue_depth" in after and "prism_webhook_oldest_pending_age_seconds" in after
    assert "prism_db_pool_connections_in_use" in after
    assert sample(after, "prism_db_pool_connections_in_use") >= 0
    assert "ck_" not in after and ws.org.id not in after  # no ids, no keys: bounded labels only


async def test_an_unknown_tool_is_counted_as_unknown_not_by_its_name(client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    refused = await client.post("/api/mcp/tools/prism_nothing_like_this/", headers=ws.headers(), json={})
    assert refused.status_code == 404
    text = await scrape(client)
    assert "prism_nothing_like_this" not in text
    assert sample(text, "prism_http_requests_total", door="rest", status_class="4xx", tool="unknown") >= 1


async def test_only_allowed_addresses_or_the_token_are_served(settings: Settings, app: Any) -> None:
    token = "metrics-" + "s" * 32
    async with limited_app(settings, app, metrics_token=SecretStr(token)) as limited:
        async with client_for(limited, "203.0.113.10") as outsider:
            refused = await outsider.get("/metrics")
            assert refused.status_code == 403
            assert refused.json() == {"error": "forbidden", "message": refused.json()["message"]}
            assert "PRISM_METRICS" in refused.json()["message"]
            wrong = await outsider.get("/metrics", headers={"Authorization": f"Bearer {token}x"})
            assert wrong.status_code == 403
            assert (await outsider.get("/metrics", headers={"Authorization": token})).status_code == 403
            assert (await outsider.get("/metrics", headers={"Authorization": f"Bearer {token}"})).status_code == 200
        async with client_for(limited, "127.0.0.1") as local:
            assert (await local.get("/metrics")).status_code == 200  # the default allow list: loopback
        async with client_for(limited, "::1") as local6:
            assert (await local6.get("/metrics/")).status_code == 200
    async with limited_app(settings, app, metrics_allow="203.0.113.0/24") as limited:
        async with client_for(limited, "203.0.113.10") as inside:
            assert (await inside.get("/metrics")).status_code == 200
        async with client_for(limited, "127.0.0.1") as local:
            assert (await local.get("/metrics")).status_code == 403
    async with limited_app(settings, app, metrics_allow="") as limited, client_for(limited, "127.0.0.1") as local:
        assert (await local.get("/metrics")).status_code == 403  # no token set and nobody allowed: nobody


async def test_metrics_are_never_limited_and_count_refusals_and_lockouts(settings: Settings, app: Any) -> None:
    async with limited_app(settings, app, lockout_failures=2, rate_limit_anonymous=3,
                           metrics_allow="203.0.113.0/24") as limited:
        async with client_for(limited, "203.0.113.20") as limited_caller:
            before = await scrape(limited_caller)
            statuses = [(await limited_caller.get("/api/v1/dev/ping/")).status_code for _ in range(5)]
            assert statuses == [200, 200, 200, 429, 429]
        async with client_for(limited, "203.0.113.10") as guesser:
            for _ in range(2):
                failed = await guesser.get("/api/v1/dev/me/", headers={"Authorization": "Bearer ck_" + "h" * 40})
                assert failed.status_code == 401
            assert (await guesser.get("/api/v1/dev/ping/")).status_code == 429  # locked out
            assert [(await guesser.get("/metrics")).status_code for _ in range(50)] == [200] * 50
            after = await scrape(guesser)
    assert sample(after, "prism_rate_limit_refusals_total", door="sandbox") - \
        sample(before, "prism_rate_limit_refusals_total", door="sandbox") == 2
    assert sample(after, "prism_lockout_refusals_total") - sample(before, "prism_lockout_refusals_total") >= 1
    assert sample(after, "prism_authentication_failures_total", door="sandbox") - \
        sample(before, "prism_authentication_failures_total", door="sandbox") == 2


async def test_a_bad_metrics_setting_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="not an IP address or network"):
        Settings(metrics_allow="127.0.0.1,not-a-network")
    with pytest.raises(ValidationError):
        Settings(log_format="xml")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="must be one of"):
        Settings(log_level="loud")


async def test_the_oauth_endpoints_at_the_origin_root_are_counted_as_oauth(client: httpx.AsyncClient,
                                                                          factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    before = await scrape(client)
    for path in ("/token", "/register", "/api/mcp/oauth/token"):
        answer = await client.post(path, headers={"Host": ws.host}, data={"grant_type": "nothing"})
        assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text)
    after = await scrape(client)
    moved = sample(after, "prism_http_requests_total", door="oauth", status_class="4xx", tool="none") - \
        sample(before, "prism_http_requests_total", door="oauth", status_class="4xx", tool="none")
    assert moved == 3
    assert sample(after, "prism_http_requests_total", door="page", status_class="4xx", tool="none") == \
        sample(before, "prism_http_requests_total", door="page", status_class="4xx", tool="none")
