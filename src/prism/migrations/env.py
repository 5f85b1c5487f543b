"""Alembic environment: runs migrations over the async engine of PRISM_DATABASE_URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection, make_url

from prism.config import get_settings
from prism.storage import one_shot_engine
from prism.tables import metadata as target_metadata_all

config = context.config
target_metadata = target_metadata_all


def _url() -> str:
    return str(config.attributes.get("database_url") or get_settings().database_url)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite", compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = one_shot_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    elif make_url(_url()).get_backend_name() == "sqlite":  # Alembic run directly: as `prism migrate` runs SQLite
        from prism.migrate import sqlite_ddl_engine

        engine = sqlite_ddl_engine(_url())
        try:
            with engine.connect() as connection:
                _run(connection)
                connection.commit()
        finally:
            engine.dispose()
    else:
        asyncio.run(_run_async())
