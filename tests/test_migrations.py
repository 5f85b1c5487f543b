"""The migrations build exactly the schema the models declare, on one linear revision history; an empty
database created at the newest revision (`prism.migrate.create_at_newest`) has that same schema."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text

from prism.migrate import alembic_config, create_at_newest, migrate_with_alembic, newest_revision, upgrade
from prism.storage import one_shot_engine
from prism.tables import metadata
from tests.processes import scratch_database


def _on(url: str, read: Any) -> Any:
    """`read(sync connection)` on a database of either engine."""

    async def run() -> Any:
        engine = one_shot_engine(url)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(read)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _schema(connection: Connection) -> dict[str, Any]:
    """Every table's columns, keys, indexes and constraints as the database reports them."""
    inspector = inspect(connection)
    schema: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        schema[table] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"], str(c.get("default"))) for c in
                        inspector.get_columns(table)],
            "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
            "foreign_keys": sorted((f["name"] or "", tuple(f["constrained_columns"]), f["referred_table"],
                                    tuple(f["referred_columns"]), str(sorted(f.get("options", {}).items())))
                                   for f in inspector.get_foreign_keys(table)),
            "indexes": sorted((i["name"] or "", tuple(i["column_names"]), bool(i["unique"]))
                              for i in inspector.get_indexes(table)),
            "unique": sorted((u["name"] or "", tuple(u["column_names"])) for u in
                             inspector.get_unique_constraints(table)),
            "checks": sorted((c["name"] or "", " ".join(str(c["sqltext"]).split())) for c in
                             inspector.get_check_constraints(table)),
        }
    return schema


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def _revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def test_the_migrated_schema_matches_the_models(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "migrated") as url:
        migrate_with_alembic(url)
        diff = _on(url, _differences)
    assert diff == [], "models and migrations disagree; write a migration:\n" + "\n".join(map(str, diff))


def test_a_database_created_at_the_newest_revision_has_the_migrated_schema(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "migrated") as migrated, scratch_database(tmp_path, "created") as created:
        migrate_with_alembic(migrated)
        upgrade(created)  # empty: created, not migrated
        expected = _on(migrated, _schema)
        assert _on(created, _schema) == expected
        assert "alembic_version" in expected
        # Alembic reads the stamp as its own: it is at head, has nothing to run, and later migrations (here:
        # stepping down one and up again) meet the names and shapes they expect.
        assert _on(created, _revision) == newest_revision()
        config = alembic_config(created)
        command.downgrade(config, "-1")
        assert _on(created, _revision) != newest_revision()
        migrate_with_alembic(created)
        assert _on(created, _revision) == newest_revision()
        assert _on(created, _schema) == expected


def test_only_an_empty_database_is_created_at_the_newest_revision(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "occupied") as url:
        def occupy(connection: Connection) -> None:
            connection.execute(text("CREATE TABLE someone_elses (id INTEGER PRIMARY KEY)"))
            connection.commit()

        _on(url, occupy)
        newest = newest_revision()
        assert newest is not None
        assert create_at_newest(url, newest) is False
        assert _on(url, lambda c: inspect(c).get_table_names()) == ["someone_elses"]


def test_the_revision_history_has_one_head(database_url: str) -> None:
    assert len(ScriptDirectory.from_config(alembic_config(database_url)).get_heads()) == 1
