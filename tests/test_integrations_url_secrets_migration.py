"""Migration 0026 seals the tokens an older Prism stored in integrations' URLs (`?token=...` in an upstream MCP
server's URL, `?api_key=...` in a connection's base URL, a token URL's query, a `last_error` that names the URL)
with the master secret Prism runs with; stepping down writes the URLs back whole."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from prism.config import Settings
from prism.integrations.sealed_urls import opened_urls
from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database, one_shot_engine
from tests.factories import Factory
from tests.migration_support import settings_for, with_app_db
from tests.processes import scratch_database
from tests.test_integrations_url_secrets import texts_holding

BEFORE = "0025_documents_word_counts"
TOKEN = "s3cret-" + "t" * 12
MCP_URL = f"https://tools.example.com/mcp?token={TOKEN}"
BASE_URL = f"https://warehouse.example.com/v2?api_key={TOKEN}&region=eu"
TOKEN_URL = f"https://auth.example.com/token?tenant={TOKEN}"
APP_ID, CONNECTION_ID = "a0000000-0000-0000-0000-000000000001", "c0000000-0000-0000-0000-000000000001"


async def stepped_down_with_an_organization(url: str, before: str) -> tuple[Config, Settings, str]:
    """The database migrated to the head, an organization made in it, then stepped down to `before`: the Alembic
    config to step up with (carrying the settings whose master secret the migration seals with), those settings,
    and the organization's id."""
    await asyncio.to_thread(migrate_with_alembic, url)
    organization_id = await with_app_db(url, lambda db: _organization(db))
    config = alembic_config(url)
    config.attributes["settings"] = settings = settings_for(url)
    await asyncio.to_thread(command.downgrade, config, before)
    return config, settings, organization_id

async def _stored_as_before(url: str, organization_id: str) -> None:
    """The rows as an older Prism wrote them: every URL whole, in the clear."""
    now = datetime.now(UTC)
    engine = one_shot_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(sa.text(
                "INSERT INTO integration_apps (id, name, kind, title, description, source, spec_digest, "
                "default_server, operations, revision, owner_organization_id, created_at, updated_at, status, "
                "last_error) VALUES (:id, 'depot', 'mcp', 'https://tools.example.com/mcp', '', :url, '', :url, "
                "'[]', 1, :org, :now, :now, 'stale', :error)"),
                {"id": APP_ID, "url": MCP_URL, "org": organization_id, "now": now,
                 "error": f"the tool list was not stored: {MCP_URL} refused ({TOKEN})"})
            await connection.execute(sa.text(
                "INSERT INTO integration_connections (id, organization_id, integration_id, base_url, auth_kind, "
                "auth_settings, timeout_seconds, enabled, created_at, updated_at) VALUES (:id, :org, :app, :url, "
                "'none', :auth, 10, true, :now, :now)"),
                {"id": CONNECTION_ID, "org": organization_id, "app": APP_ID, "url": BASE_URL, "now": now,
                 "auth": f'{{"token_url": "{TOKEN_URL}", "client_id": "prism"}}'})
    finally:
        await engine.dispose()


async def _rows(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    engine = one_shot_engine(url)
    try:
        async with engine.connect() as connection:
            app = (await connection.execute(sa.text(
                "SELECT * FROM integration_apps WHERE id = :id"), {"id": APP_ID})).mappings().one()
            conn = (await connection.execute(sa.text(
                "SELECT * FROM integration_connections WHERE id = :id"), {"id": CONNECTION_ID})).mappings().one()
    finally:
        await engine.dispose()
    return dict(app), dict(conn)


def _json(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else json.loads(value)


async def test_the_upgrade_seals_tokens_stored_in_urls_and_stepping_down_gives_them_back(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "urlsecrets") as url:
        config, settings, organization_id = await stepped_down_with_an_organization(url, BEFORE)
        await _stored_as_before(url, organization_id)

        await asyncio.to_thread(command.upgrade, config, "head")
        app, connection = await _rows(url)
        assert app["source"] == app["default_server"] == "https://tools.example.com/mcp?token=********"
        assert connection["base_url"] == "https://warehouse.example.com/v2?api_key=********&region=********"
        assert _json(connection["auth_settings"]) == {"token_url": "https://auth.example.com/token?tenant=********",
                                                      "client_id": "prism"}
        assert TOKEN not in app["last_error"] and "the tool list was not stored" in app["last_error"]
        assert opened_urls(settings, APP_ID, app["sealed_urls"]) == {"source": MCP_URL, "default_server": MCP_URL}
        assert opened_urls(settings, CONNECTION_ID, connection["sealed_urls"]) == {"base_url": BASE_URL,
                                                                                  "token_url": TOKEN_URL}
        assert await with_app_db(url, lambda db: texts_holding(db, "s3cret")) == []

        await asyncio.to_thread(command.downgrade, config, BEFORE)
        app, connection = await _rows(url)
        assert app["source"] == app["default_server"] == MCP_URL and connection["base_url"] == BASE_URL
        assert _json(connection["auth_settings"])["token_url"] == TOKEN_URL


async def _organization(db: Database) -> str:
    return (await Factory(db).workspace(roles=())).org.id
