"""The migrations build exactly the schema the models declare, on one linear revision history."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from prism.db import one_shot_engine
from prism.migrate import alembic_config
from prism.tables import metadata


async def test_the_migrated_schema_matches_the_models(database_url: str) -> None:
    engine = one_shot_engine(database_url)
    try:
        async with engine.connect() as connection:
            def differences(sync_connection: Any) -> list[Any]:
                context = MigrationContext.configure(sync_connection, opts={"compare_type": True})
                return list(compare_metadata(context, metadata))

            diff = await connection.run_sync(differences)
    finally:
        await engine.dispose()
    assert diff == [], "models and migrations disagree; write a migration:\n" + "\n".join(map(str, diff))


def test_the_revision_history_has_one_head(database_url: str) -> None:
    assert len(ScriptDirectory.from_config(alembic_config(database_url)).get_heads()) == 1
