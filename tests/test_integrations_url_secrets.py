"""A token written into an integration's URL (`?token=...`, `?api_key=...`) is sealed at rest, as a connection's
credential is (docs/integrations.md, "Credentials written into URLs"): no text column of any table holds it,
calls still reach the upstream with it in the URL, and another organization sees nothing. Real upstreams on
loopback, on the suite's engine."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import MetaData, select

from prism.config import Settings
from prism.integrations.models import IntegrationApp, IntegrationConnection
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.integrations_mcp_upstream import UPSTREAM_KEY, RunningMcp
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    RunningService,
    SpecService,
    upstream_tls_fixture,
)
from tests.processes import cli_json
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

ITEMS = {
    "openapi": "3.0.3", "info": {"title": "Stock", "version": "1"},
    "paths": {"/items/{itemId}": {"get": {
        "tags": ["items"], "operationId": "getItem",
        "parameters": [{"name": "itemId", "in": "path", "required": True, "schema": {"type": "integer"}},
                       {"name": "fields", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The item."}}}}}}


async def texts_holding(db: Database, secret: str) -> list[str]:
    """Every table.column of the database (every table, every column, as the database has them) whose value
    holds `secret`, as text or bytes."""
    found: list[str] = []
    async with db.read() as session:
        connection = await session.connection()
        tables = MetaData()
        await connection.run_sync(lambda sync: tables.reflect(sync))
        for table in tables.sorted_tables:
            for row in (await session.execute(select(table))).mappings():
                for column, value in row.items():
                    text = value.decode("latin-1") if isinstance(value, bytes) else (
                        json.dumps(value) if isinstance(value, dict | list) else str(value))
                    if secret in text:
                        found.append(f"{table.name}.{column}")
    return found


async def test_tokens_in_urls_are_sealed_and_calls_still_carry_them(
        client: httpx.AsyncClient, factory: Factory, db: Database, tls: TlsFiles) -> None:
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    token = "s3cret" + uuid.uuid4().hex  # one per run: the suite's database is shared
    mcp, oas = "mcp_" + uuid.uuid4().hex[:8], "oas_" + uuid.uuid4().hex[:8]
    upstream = await RunningMcp(tls).start()
    upstream.gate.query = f"token={token}".encode()  # refused without the token in its URL
    running = RunningService(SpecService(ITEMS, base_path="/v2", required_query={"api_key": token}), tls)
    service = await running.start()
    try:
        added = await ok(client, a, "config_manage/integrations/integration/addMcp", {
            "name": mcp, "url": f"{upstream.url}?token={token}", "transport": "streamable_http",
            "auth_kind": "api_key", "header": "X-Upstream-Key", "secret": UPSTREAM_KEY})
        assert "tool/getForecast" in added["added"]
        imported = await ok(client, a, "config_manage/integrations/integration/importOpenapi",
                            {"name": oas, "spec": ITEMS})
        assert imported["added"] == ["items/getItem"], imported
        connected = await ok(client, a, "config_manage/integrations/connection/set", {
            "name": oas, "base_url": f"{service.url()}?api_key={token}"})
        assert connected["base_url"] == f"{service.url()}?api_key=********"

        forecast = await post(client, a, f"integration_call/{mcp}/tool/getForecast", {"city": "Oslo"})
        assert forecast.status_code == 200, forecast.text
        assert forecast.json()["data"]["structuredContent"]["city"] == "Oslo"
        item = await post(client, a, f"integration_call/{oas}/items/getItem", {"itemId": 7, "fields": "name"})
        assert item.status_code == 200, item.text
        arrived = service.arrived[-1]
        assert arrived.path == "/v2/items/7" and arrived.query == [("fields", "name")]
        assert not service.invalid  # the base URL's api_key arrived too (checked by the service)

        for record in (await ok(client, a, "config_manage/integrations/integration/read", {"name": mcp}),
                       await ok(client, a, "config_manage/integrations/connection/list", {"page_size": 100})):
            assert token not in json.dumps(record) and "********" in json.dumps(record), record
        assert await texts_holding(db, token) == []
        async with db.read() as session:  # sealed, not dropped
            assert (await session.execute(select(IntegrationApp.sealed_urls).where(IntegrationApp.name == mcp))
                    ).scalar()
            assert all((await session.execute(select(IntegrationConnection.sealed_urls).where(
                IntegrationConnection.organization_id == a.org.id))).scalars())

        for name, coordinate in ((mcp, "tool/getForecast"), (oas, "items/getItem")):
            hidden = await post(client, b, "config_manage/integrations/integration/read", {"name": name})
            assert hidden.status_code == 404, hidden.text
            called = await post(client, b, f"integration_call/{name}/{coordinate}", {"city": "Oslo", "itemId": 7})
            assert called.status_code == 404 and called.json()["error"] == "operation_not_found", called.text
        listed: dict[str, Any] = await ok(client, b, "config_manage/integrations/integration/list",
                                          {"page_size": 100})
        assert mcp not in json.dumps(listed) and oas not in json.dumps(listed)
    finally:
        await upstream.stop()
        await running.stop()


async def test_the_operator_adds_and_refreshes_an_upstream_whose_url_carries_a_token(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings, tls: TlsFiles) -> None:
    """`prism integration add-mcp URL?token=...` stores the token sealed; `refresh` reads the list again from the
    URL as added (the upstream refuses it without the token); an organization connected to it calls through."""
    token = "s3cret" + uuid.uuid4().hex
    upstream = await RunningMcp(tls).start()
    upstream.gate.query = f"token={token}".encode()
    name = "mcp_" + uuid.uuid4().hex[:8]
    options = ("--auth", "api_key", "--header", "X-Upstream-Key")
    env = {"PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "PRISM_WEBHOOK_CA_BUNDLE": settings.webhook_ca_bundle
           or "", "PRISM_CONNECTION_SECRET": UPSTREAM_KEY}
    try:
        added = await asyncio.to_thread(cli_json, "integration", "add-mcp", f"{upstream.url}?token={token}", "--app",
                                        name, *options, database_url=settings.database_url, **env)
        assert added["created"] is True and added["handlers"] == 6
        refreshed = await asyncio.to_thread(cli_json, "integration", "refresh", name, *options,
                                            database_url=settings.database_url, **env)
        assert refreshed["unchanged"] == 6
        ws = await factory.workspace(roles=("owner",))
        await ok(client, ws, "config_manage/integrations/connection/set", {
            "name": name, "base_url": f"{upstream.url}?token={token}", "auth_kind": "api_key",
            "header": "X-Upstream-Key", "secret": UPSTREAM_KEY})
        called = await post(client, ws, f"integration_call/{name}/tool/getForecast", {"city": "Kyiv"})
        assert called.status_code == 200, called.text
        assert await texts_holding(db, token) == []
    finally:
        await upstream.stop()
        await asyncio.to_thread(cli_json, "integration", "remove", name, database_url=settings.database_url)
