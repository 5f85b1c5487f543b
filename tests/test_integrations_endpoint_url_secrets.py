"""A key written into an integration endpoint's URL (`?api_key=...`) is sealed at rest, as an imported connection's
is (docs/integrations.md, "Endpoints"): the endpoint's `base_url` and each call log's `url` keep the query values
withheld, every read shows them so, calls still carry the key, and another organization sees nothing. A real
HTTPS service on loopback that refuses requests without the key; the suite's engine."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from sqlalchemy import select

from prism.apps.integrations.models import CallLog, Endpoint
from prism.config import Settings
from prism.integrations.sealed_urls import opened_urls
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS
    RunningService,
    Scripted,
    SpecService,
    upstream_tls_fixture,
)
from tests.test_integrations_url_secrets import ITEMS, texts_holding
from tests.webhooks_receiver import TlsFiles

MASKED = "api_key=********"


async def test_a_key_in_an_endpoints_url_is_sealed_shown_withheld_and_still_sent(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings, tls: TlsFiles) -> None:
    mine = Caller(client, await factory.workspace(roles=("owner",)))
    theirs = Caller(client, await factory.workspace(roles=("owner",)))
    key, next_key = ("s3cret" + uuid.uuid4().hex for _ in range(2))  # one per run: the suite's database is shared
    service = SpecService(ITEMS, base_path="/v2", required_query={"api_key": key})
    running = RunningService(service, tls)
    await running.start()
    try:
        made = await mine.create("integrations", "endpoint", {
            "name": "Stock", "base_url": f"{service.url()}?api_key={key}", "default_method": "GET"})
        assert made["base_url"] == f"{service.url()}?{MASKED}" and "sealed_urls" not in made
        # The upstream echoes the key it was sent: neither the call's answer nor its log carries it.
        service.script("getItem", Scripted(200, {"seen": key}))
        called = await mine.ok("integration_call", "integrations", "endpoint", "call", {
            "id": made["id"], "path": "/items/7", "query": {"fields": "name"}})
        assert (called["ok"], called["body"]) == (True, {"seen": "********"}), called
        assert not service.invalid and service.arrived[-1].query == [("fields", "name")]  # the key arrived too

        logs = await mine.ok("entity_crud", "integrations", "call_log", "list", {"endpoint_id": made["id"]})
        [log] = logs["items"]
        assert log["url"] == f"{service.url()}/items/7?{MASKED}&fields=********", log
        assert log["response_excerpt"] == '{"seen":"********"}'
        for shown in (await mine.ok("entity_crud", "integrations", "endpoint", "read", {"id": made["id"]}),
                      await mine.ok("entity_crud", "integrations", "endpoint", "list", {}),
                      await mine.ok("entity_crud", "integrations", "endpoint", "readMany", {"ids": [made["id"]]}),
                      await mine.ok("entity_crud", "integrations", "call_log", "read", {"id": log["id"]})):
            assert key not in json.dumps(shown) and MASKED in json.dumps(shown) and "sealed_urls" not in shown
        found = await mine.ok("entity_crud", "integrations", "endpoint", "list", {"search": key})
        assert found["total"] == 0  # the key is not in any searched column

        # Changed to another key: sealed again, the call carries the new one.
        service.required_query["api_key"] = next_key
        changed = await mine.ok("entity_crud", "integrations", "endpoint", "update", {
            "id": made["id"], "base_url": f"{service.url()}?api_key={next_key}"})
        assert changed["base_url"] == f"{service.url()}?{MASKED}"
        again = await mine.ok("integration_call", "integrations", "endpoint", "call", {
            "id": made["id"], "path": "/items/8"})
        assert again["ok"] is True and not service.invalid, again

        for secret in (key, next_key):
            assert await texts_holding(db, secret) == []
        async with db.read() as session:  # sealed, not dropped: each bound to its row
            endpoint = (await session.execute(select(Endpoint).where(Endpoint.id == made["id"]))).scalar_one()
            assert opened_urls(settings, endpoint.id, endpoint.sealed_urls) == {
                "base_url": f"{service.url()}?api_key={next_key}"}
            sealed_log = (await session.execute(select(CallLog).where(CallLog.id == log["id"]))).scalar_one()
            assert opened_urls(settings, sealed_log.id, sealed_log.sealed_urls) == {
                "url": f"{service.url()}/items/7?api_key={key}&fields=name"}

        # Another organization: not found, not listed, not callable.
        for operation, arguments in (("read", {"id": made["id"]}), ("update", {"id": made["id"], "description": "x"})):
            await theirs.refused(404, "not_found", "entity_crud", "integrations", "endpoint", operation, arguments)
        await theirs.refused(404, "not_found", "integration_call", "integrations", "endpoint", "call",
                             {"id": made["id"]})
        await theirs.refused(404, "not_found", "entity_crud", "integrations", "call_log", "read", {"id": log["id"]})
        assert (await theirs.ok("entity_crud", "integrations", "endpoint", "list", {}))["total"] == 0
        assert (await theirs.ok("entity_crud", "integrations", "call_log", "list", {}))["total"] == 0
    finally:
        await running.stop()


@pytest.mark.parametrize("base_url", ["https://erp.example.com/api", "https://erp.example.com/api?v=2"])
def test_a_calls_path_goes_before_the_base_urls_query_and_its_own_query_after_it(base_url: str) -> None:
    from prism.apps.integrations.endpoint_urls import call_url

    query = "?v=2&dry=no" if "?" in base_url else "?dry=no"
    assert call_url(base_url, "/orders", {"dry": "no"}) == "https://erp.example.com/api/orders" + query
    assert call_url(base_url, "", {}) == base_url
