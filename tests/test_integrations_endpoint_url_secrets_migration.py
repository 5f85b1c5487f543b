"""Migration 0029 seals the keys an older Prism stored in integration endpoints' URLs (`?api_key=...` in an
endpoint's base URL, in each call log's URL, its error and the excerpt of an answer that echoed it) with the
master secret Prism runs with; stepping down writes the URLs back whole."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command

from prism.integrations.sealed_urls import opened_urls
from prism.storage import one_shot_engine
from tests.migration_support import with_app_db
from tests.processes import scratch_database
from tests.test_integrations_url_secrets import texts_holding
from tests.test_integrations_url_secrets_migration import stepped_down_with_an_organization

BEFORE = "0028_webhook_fair_claims"
KEY = "s3cret-" + "k" * 12
BASE_URL = f"https://erp.example.com/v2?api_key={KEY}&region=eu"
CALLED = f"https://erp.example.com/v2/orders?api_key={KEY}&region=eu&page=2"
PLAIN = "https://plain.example.com/api"
ENDPOINT_ID, PLAIN_ID = "e0000000-0000-0000-0000-000000000001", "e0000000-0000-0000-0000-000000000002"
LOG_ID = "l0000000-0000-0000-0000-000000000001"


async def _stored_as_before(url: str, organization_id: str) -> None:
    """The rows as an older Prism wrote them: every URL whole, in the clear."""
    now = datetime.now(UTC)
    engine = one_shot_engine(url)
    try:
        async with engine.begin() as connection:
            for endpoint_id, name, base_url in ((ENDPOINT_ID, "ERP", BASE_URL), (PLAIN_ID, "Plain", PLAIN)):
                await connection.execute(sa.text(
                    "INSERT INTO integrations_endpoints (id, organization_id, name, description, base_url, "
                    "default_method, headers, timeout_seconds, status, created_at) VALUES (:id, :org, :name, '', "
                    ":url, 'GET', '{}', 10, 'enabled', :now)"),
                    {"id": endpoint_id, "org": organization_id, "name": name, "url": base_url, "now": now})
            await connection.execute(sa.text(
                "INSERT INTO integrations_call_logs (id, organization_id, endpoint_id, method, url, request_bytes, "
                "status_code, ok, duration_ms, error, response_excerpt, actor_email, created_at) VALUES (:id, :org, "
                ":endpoint, 'GET', :url, 0, 502, false, 12, :error, :excerpt, 'a@example.com', :now)"),
                {"id": LOG_ID, "org": organization_id, "endpoint": ENDPOINT_ID, "url": CALLED, "now": now,
                 "error": f"ClientConnectorError: cannot connect to {CALLED}",
                 "excerpt": f'{{"echo": "{KEY}"}}'})
    finally:
        await engine.dispose()


async def _rows(url: str) -> dict[str, dict[str, Any]]:
    engine = one_shot_engine(url)
    try:
        async with engine.connect() as connection:
            rows = {row["id"]: dict(row) for row in (await connection.execute(sa.text(
                "SELECT * FROM integrations_endpoints"))).mappings()}
            log = (await connection.execute(sa.text("SELECT * FROM integrations_call_logs WHERE id = :id"),
                                            {"id": LOG_ID})).mappings().one()
    finally:
        await engine.dispose()
    return {**rows, LOG_ID: dict(log)}


async def test_the_upgrade_seals_keys_stored_in_endpoint_urls_and_stepping_down_gives_them_back(
        tmp_path: Path) -> None:
    with scratch_database(tmp_path, "endpointurls") as url:
        config, settings, organization_id = await stepped_down_with_an_organization(url, BEFORE)
        await _stored_as_before(url, organization_id)

        await asyncio.to_thread(command.upgrade, config, "head")
        rows = await _rows(url)
        endpoint, plain, log = rows[ENDPOINT_ID], rows[PLAIN_ID], rows[LOG_ID]
        assert endpoint["base_url"] == "https://erp.example.com/v2?api_key=********&region=********"
        assert (plain["base_url"], plain["sealed_urls"]) == (PLAIN, None)  # nothing to seal
        assert log["url"] == "https://erp.example.com/v2/orders?api_key=********&region=********&page=********"
        assert KEY not in log["error"] and "cannot connect" in log["error"]
        assert log["response_excerpt"] == '{"echo": "********"}'
        assert opened_urls(settings, ENDPOINT_ID, endpoint["sealed_urls"]) == {"base_url": BASE_URL}
        assert opened_urls(settings, LOG_ID, log["sealed_urls"]) == {"url": CALLED}
        assert await with_app_db(url, lambda db: texts_holding(db, KEY)) == []

        await asyncio.to_thread(command.downgrade, config, BEFORE)
        rows = await _rows(url)
        assert rows[ENDPOINT_ID]["base_url"] == BASE_URL and rows[LOG_ID]["url"] == CALLED
        assert "sealed_urls" not in rows[ENDPOINT_ID] and "sealed_urls" not in rows[LOG_ID]
