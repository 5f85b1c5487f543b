"""endpoint url secrets: a key written into an endpoint's URL is sealed, as an imported connection's is

An integration endpoint's `base_url` and a call log's `url` keep in the clear their address with each query value
and the fragment withheld (`?api_key=********`); the URLs as given go sealed into new `sealed_urls` columns
(prism.apps.integrations.endpoint_urls), under the key 0026_integration_url_secrets uses, with the master secret of
the settings Prism runs with. A call log's error and response excerpt have the URL's query values withheld too.
The secret is read only when a row holds such a URL. Stepping down writes the URLs back whole and drops the
columns (a withheld value in an error or excerpt stays withheld).

Revision ID: 0029_endpoint_url_secrets
Revises: 0028_webhook_fair_claims
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from prism.config import Settings, get_settings

revision: str = "0029_endpoint_url_secrets"
down_revision: str | None = "0028_webhook_fair_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

endpoints = sa.table("integrations_endpoints", sa.column("id", sa.String), sa.column("base_url", sa.String),
                     sa.column("sealed_urls", sa.Text))
call_logs = sa.table("integrations_call_logs", sa.column("id", sa.String), sa.column("url", sa.String),
                     sa.column("error", sa.String), sa.column("response_excerpt", sa.Text),
                     sa.column("sealed_urls", sa.Text))
TABLES = ("integrations_endpoints", "integrations_call_logs")


def _settings() -> Settings:
    """The settings Prism migrates with (a test may hand its own to Alembic's config)."""
    given = context.config.attributes.get("settings")
    return given if isinstance(given, Settings) else get_settings()


def upgrade() -> None:
    from prism.integrations.failures import without_credentials, without_url_secrets
    from prism.integrations.sealed_urls import seal_urls
    from prism.kit.urls import without_secrets

    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("sealed_urls", sa.Text(), nullable=True))
    connection = op.get_bind()
    settings: Settings | None = None
    for row in connection.execute(sa.select(endpoints)).all():
        if without_secrets(row.base_url) == row.base_url:
            continue
        settings = settings or _settings()
        connection.execute(endpoints.update().where(endpoints.c.id == row.id).values(
            base_url=without_secrets(row.base_url)[:2048], sealed_urls=seal_urls(settings, row.id, {"base_url": row.base_url})))
    for log in connection.execute(sa.select(call_logs)).all():
        if without_secrets(log.url) == log.url:
            continue
        settings = settings or _settings()
        connection.execute(call_logs.update().where(call_logs.c.id == log.id).values(
            url=without_secrets(log.url)[:4096], sealed_urls=seal_urls(settings, log.id, {"url": log.url}),
            error=without_credentials(log.error or "", urls=(log.url,))[:1000],
            response_excerpt=without_url_secrets(log.response_excerpt or "", (log.url,))))


def downgrade() -> None:
    from prism.integrations.sealed_urls import opened_urls

    connection = op.get_bind()
    sealed_endpoints = connection.execute(sa.select(endpoints).where(endpoints.c.sealed_urls.is_not(None))).all()
    sealed_logs = connection.execute(sa.select(call_logs).where(call_logs.c.sealed_urls.is_not(None))).all()
    settings = _settings() if sealed_endpoints or sealed_logs else None
    for row in sealed_endpoints:
        assert settings is not None
        whole = opened_urls(settings, row.id, row.sealed_urls)
        connection.execute(endpoints.update().where(endpoints.c.id == row.id).values(
            base_url=whole.get("base_url", row.base_url)))
    for log in sealed_logs:
        assert settings is not None
        whole = opened_urls(settings, log.id, log.sealed_urls)
        connection.execute(call_logs.update().where(call_logs.c.id == log.id).values(url=whole.get("url", log.url)))
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("sealed_urls")
