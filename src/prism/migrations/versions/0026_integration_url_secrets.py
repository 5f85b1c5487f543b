"""integration url secrets: a token written into an integration's URL is sealed, as its credential is

An integration's `source` and `default_server`, a connection's `base_url` and token URL keep in the clear their
address with each query value and the fragment withheld (`?token=********`); the URLs as given go sealed into the
new `sealed_urls` columns (prism.integrations.sealed_urls). Rows stored before are sealed here, with the master
secret of the settings Prism runs with (PRISM_SECRET_KEY or PRISM_SECRET_KEY_FILE, as `prism migrate` and
`prism serve` read them); a `last_error` kept before failures were written without credentials has the URLs'
query values withheld too. The secret is read only when a row holds such a URL. Stepping down writes the URLs
back whole and drops the columns.

Revision ID: 0026_integration_url_secrets
Revises: 0025_documents_word_counts
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from prism.config import Settings, get_settings

revision: str = "0026_integration_url_secrets"
down_revision: str | None = "0025_documents_word_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

apps = sa.table("integration_apps", sa.column("id", sa.String), sa.column("source", sa.String),
                sa.column("default_server", sa.String), sa.column("last_error", sa.String),
                sa.column("sealed_urls", sa.Text))
connections = sa.table("integration_connections", sa.column("id", sa.String), sa.column("base_url", sa.String),
                       sa.column("auth_settings", sa.JSON), sa.column("sealed_urls", sa.Text))


def _settings() -> Settings:
    """The settings Prism migrates with (a test may hand its own to Alembic's config)."""
    given = context.config.attributes.get("settings")
    return given if isinstance(given, Settings) else get_settings()


def upgrade() -> None:
    from prism.integrations.failures import without_credentials
    from prism.integrations.sealed_urls import seal_urls
    from prism.kit.urls import without_secrets

    for table in ("integration_apps", "integration_connections"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("sealed_urls", sa.Text(), nullable=True))
    connection = op.get_bind()
    settings: Settings | None = None
    for row in connection.execute(sa.select(apps)).all():
        urls = {"source": row.source, "default_server": row.default_server}
        if all(without_secrets(url or "") == (url or "") for url in urls.values()):
            continue
        settings = settings or _settings()
        connection.execute(apps.update().where(apps.c.id == row.id).values(
            source=without_secrets(row.source)[:2048],
            default_server=without_secrets(row.default_server)[:2048] if row.default_server else None,
            last_error=without_credentials(row.last_error or "", urls=[u for u in urls.values() if u])[:1000],
            sealed_urls=seal_urls(settings, row.id, urls)))
    for row in connection.execute(sa.select(connections)).all():
        kept: dict[str, Any] = dict(row.auth_settings or {})
        urls = {"base_url": row.base_url, "token_url": kept.get("token_url")}
        if all(without_secrets(url or "") == (url or "") for url in urls.values()):
            continue
        settings = settings or _settings()
        if kept.get("token_url"):
            kept["token_url"] = without_secrets(kept["token_url"])
        connection.execute(connections.update().where(connections.c.id == row.id).values(
            base_url=without_secrets(row.base_url)[:2048], auth_settings=kept, sealed_urls=seal_urls(settings, row.id, urls)))


def downgrade() -> None:
    from prism.integrations.sealed_urls import opened_urls

    connection = op.get_bind()
    sealed_apps = connection.execute(sa.select(apps).where(apps.c.sealed_urls.is_not(None))).all()
    sealed_connections = connection.execute(
        sa.select(connections).where(connections.c.sealed_urls.is_not(None))).all()
    settings = _settings() if sealed_apps or sealed_connections else None
    for row in sealed_apps:
        assert settings is not None
        whole = opened_urls(settings, row.id, row.sealed_urls)
        connection.execute(apps.update().where(apps.c.id == row.id).values(
            source=whole.get("source", row.source), default_server=whole.get("default_server", row.default_server)))
    for row in sealed_connections:
        assert settings is not None
        whole = opened_urls(settings, row.id, row.sealed_urls)
        kept = dict(row.auth_settings or {})
        if "token_url" in whole:
            kept["token_url"] = whole["token_url"]
        connection.execute(connections.update().where(connections.c.id == row.id).values(
            base_url=whole.get("base_url", row.base_url), auth_settings=kept))
    for table in ("integration_apps", "integration_connections"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("sealed_urls")
