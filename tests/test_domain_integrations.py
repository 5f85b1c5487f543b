"""integrations: endpoints are SSRF-checked when saved and when called, under the serving app's settings;
calls reach a real HTTPS server and are logged; credentials are never stored; another organization's
endpoints are not found."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from prism.apps.integrations.handlers import MAX_RESPONSE
from prism.config import Settings, get_settings
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.webhooks_receiver import Answer, Receiver, RunningReceiver, TlsFiles, make_tls


@pytest.fixture
def private_networks_allowed(tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> TlsFiles:
    """What an operator does for an on-premise system with a private CA: the serving app's settings allow it
    (the process environment does not)."""
    tls = make_tls(tmp_path)
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhook_ca_bundle", str(tls.ca))
    return tls


@pytest.fixture
def environment_allows_private_networks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS", "true")
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
async def receiver(private_networks_allowed: TlsFiles) -> AsyncIterator[Receiver]:
    running = RunningReceiver(private_networks_allowed)
    yield await running.start()
    await running.stop()


async def test_loopback_private_and_plain_http_urls_are_refused_when_saved(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    for url in ("https://127.0.0.1:8443/api", "https://10.1.2.3/api", "https://169.254.169.254/latest/meta-data",
                "http://erp.example.com/api", "https://user:pw@erp.example.com/"):
        await c.refused(400, "url_not_allowed", "entity_crud", "integrations", "endpoint", "create",
                        {"name": "ERP", "base_url": url})
    message = await c.refused(400, "invalid_arguments", "entity_crud", "integrations", "endpoint", "create",
                              {"name": "ERP", "base_url": "https://93.184.215.14/api",
                               "headers": {"Authorization": "Bearer secret"}})
    assert "credential" in message and "secret" not in message.replace("secrets", "")


async def test_a_call_reaches_the_endpoint_and_is_logged(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {
        "name": "Carrier", "base_url": receiver.url("/api"), "headers": {"X-Tenant": "acme"}})
    receiver.script("/api/shipments", [Answer(status=201, body='{"tracking": "TRK-1"}',
                                              headers={"content-type": "application/json"})])
    result = await c.ok("integration_call", "integrations", "endpoint", "call", {
        "id": endpoint["id"], "path": "/shipments", "query": {"dry": "no"}, "body": {"parcels": 2}})
    assert (result["ok"], result["status_code"], result["body"]) == (True, 201, {"tracking": "TRK-1"})
    [arrived] = receiver.at("/api/shipments")
    assert json.loads(arrived.body) == {"parcels": 2} and arrived.headers["x-tenant"] == "acme"
    receiver.script("/api", [Answer(status=503, body="maintenance")])
    ping = await c.ok("integration_call", "integrations", "endpoint", "ping", {"id": endpoint["id"]})
    assert (ping["ok"], ping["status_code"], ping["error"]) == (False, 503, "HTTP 503")
    logs = await c.ok("entity_crud", "integrations", "call_log", "list", {"endpoint_id": endpoint["id"]})
    assert [(x["method"], x["status_code"], x["ok"]) for x in logs["items"]] == [("GET", 503, False),
                                                                                ("POST", 201, True)]
    assert logs["items"][0]["response_excerpt"] == "maintenance"
    health = await c.ok("report_query", "integrations", "endpoint", "health", {})
    assert health["endpoints"] == [{"endpoint_id": endpoint["id"], "name": "Carrier", "status": "enabled", "calls": 2,
                                    "success_rate": 0.5, "p50_ms": min(x["duration_ms"] for x in logs["items"]),
                                    "p95_ms": max(x["duration_ms"] for x in logs["items"]), "last_error": "HTTP 503"}]
    await c.ok("workflow_action", "integrations", "endpoint", "disable", {"id": endpoint["id"]})
    await c.refused(409, "invalid_transition", "integration_call", "integrations", "endpoint", "ping",
                    {"id": endpoint["id"]})


async def test_an_oversized_answer_is_cut_and_a_hanging_endpoint_times_out(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Slow", "base_url": receiver.url("/slow"),
                                                           "timeout_seconds": 1})
    receiver.script("/slow/big", [Answer(body="x" * (MAX_RESPONSE + 10))])
    big = await c.ok("integration_call", "integrations", "endpoint", "call", {"id": endpoint["id"], "path": "/big"})
    assert (big["ok"], big["status_code"]) == (False, 200) and "truncated" in big["error"]
    assert big["body"] == "x" * MAX_RESPONSE
    receiver.script("/slow/hang", [Answer(delay=3)])
    hung = await c.ok("integration_call", "integrations", "endpoint", "call", {"id": endpoint["id"], "path": "/hang"})
    assert (hung["ok"], hung["status_code"], hung["error"]) == (False, None, "no response within 1 s")


async def test_a_saved_endpoint_is_refused_at_connect_time_once_private_networks_are_off(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver, settings: Settings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Local", "base_url": receiver.url("/x")})
    monkeypatch.setattr(settings, "webhook_allow_private_networks", False)
    result = await c.ok("integration_call", "integrations", "endpoint", "ping", {"id": endpoint["id"]})
    assert result["ok"] is False and result["status_code"] is None and "refused" in result["error"]
    assert receiver.at("/x") == []


async def test_another_organizations_endpoints_cannot_be_called_or_read(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await theirs.create("integrations", "endpoint", {"name": "Bank", "base_url": receiver.url("/bank")})
    await mine.refused(404, "not_found", "integration_call", "integrations", "endpoint", "call",
                       {"id": endpoint["id"], "body": {"pay": 1}})
    await mine.refused(404, "not_found", "entity_crud", "integrations", "endpoint", "read", {"id": endpoint["id"]})
    assert receiver.at("/bank") == []
    assert (await mine.ok("entity_crud", "integrations", "call_log", "count", {}))["count"] == 0


async def test_a_hanging_endpoint_holds_up_no_other_call(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver, db: Database) -> None:
    """The request goes out after the call's audit entry is committed, outside the ledger's transaction: on
    SQLite (one writer) a slow endpoint inside it would stall every call of the process until its timeout."""
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Slow", "base_url": receiver.url("/slow"),
                                                           "timeout_seconds": 3})
    receiver.script("/slow/hang", [Answer(delay=5)] * 5)
    hanging = [asyncio.create_task(c.ok("integration_call", "integrations", "endpoint", "call",
                                        {"id": endpoint["id"], "path": "/hang"})) for _ in range(5)]
    # All five are out at once: none waits for another's answer inside a ledger transaction.
    await receiver.wait_for("/slow/hang", 5, within=2.5)
    started = time.monotonic()
    parts = await c.ok("entity_crud", "spare_parts", "spare_part", "list", {})
    created = await c.create("spare_parts", "spare_part", {"sku": "HANG-1", "name": "Written meanwhile"})
    assert time.monotonic() - started < 1.5 and parts["items"] is not None and created["sku"] == "HANG-1"
    assert not any(task.done() for task in hanging)
    for result in await asyncio.gather(*hanging):
        assert (result["ok"], result["error"]) == (False, "no response within 3 s") and result["call_log_id"]
    async with db.read() as session:  # the five calls were audited before they were sent, and logged after
        entries = (await session.execute(text(
            "SELECT count(*) FROM audit_entries WHERE coordinate = 'integration_call/integrations/endpoint/call'"
            " AND organization_id = :org"), {"org": c.ws.org.id})).scalar_one()
    assert entries == 5


@pytest.mark.usefixtures("environment_allows_private_networks")
async def test_the_serving_apps_settings_decide_not_the_process_environment(
        client: httpx.AsyncClient, factory: Factory, settings: Settings) -> None:
    """An app built with settings of its own (embedded, or several apps in one process) keeps its outbound
    policy even when the environment says otherwise."""
    assert get_settings().webhook_allow_private_networks and not settings.webhook_allow_private_networks
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    await c.refused(400, "url_not_allowed", "entity_crud", "integrations", "endpoint", "create",
                    {"name": "Metadata", "base_url": "https://169.254.169.254/latest"})
    await c.refused(400, "url_not_allowed", "entity_crud", "integrations", "endpoint", "create",
                    {"name": "Local", "base_url": "https://127.0.0.1:8443/api"})
