"""Bring a database to the newest revision (used by `prism migrate` and `prism serve`).

Every start of `prism serve` migrates first, so the three cases are kept cheap:

- At the newest revision: nothing to do. Alembic would still import itself and load every migration
  script to find that out (about a third of a second); `upgrade` compares the database's revision with
  the newest one, read straight from the scripts' `revision`/`down_revision` lines.
- Empty (no table at all): the schema the models declare is created in one transaction and stamped with
  the newest revision, as Alembic's cookbook describes ("Building an Up to Date Database from Scratch").
  Replaying every migration — SQLite's batch mode recreates a table per altered column — took 0.44 s of
  a first start; this takes 0.04 s. tests/test_migrations.py proves both give the same schema, so
  databases created either way take later migrations alike.
- Anything else: Alembic runs the missing migrations.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    event,
    inspect,
    make_url,
    text,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from prism.errors import PrismError
from prism.storage import one_shot_engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


# Alembic's own table, as `alembic stamp` creates it (name, column and primary key constraint).
_VERSION_TABLE = Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                       PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))


@dataclass(frozen=True)
class LedgerSteps:
    """What the upgrade that just ran leaves to do to the audit ledger, with the master secret, trusting the
    database as it found it (docs/audit.md "Upgrading"): nothing else does either, at any other time."""

    # Crossed `0013_ledger_tree`: logs written before signed heads get their first signature.
    sign_unsigned_heads: bool = False
    # Crossed `0027_ledger_attested_prunes`: prunes made before are attested, and entries left waiting get the
    # MAC bound to their row id (prism.ledger.upgrade).
    attest_as_found: bool = False

    def __bool__(self) -> bool:
        return self.sign_unsigned_heads or self.attest_as_found


def upgrade(database_url: str) -> LedgerSteps:
    """Migrate; what the ledger needs done now that this upgrade brought its logs across (`LedgerSteps`)."""
    newest = newest_revision()
    current = database_revision(database_url)
    if newest is not None:
        if current == newest:
            return LedgerSteps()
        if current is not None and current not in _revisions_before(newest):
            raise PrismError(f"the database is at revision {current}, which this Prism does not have: a newer "
                             f"Prism migrated it (this one ends at {newest}); run that version or a newer one",
                             code="database_newer")
        if current is None and create_at_newest(database_url, newest):
            return LedgerSteps()
    migrate_with_alembic(database_url)
    if current is None:
        return LedgerSteps()
    return LedgerSteps(sign_unsigned_heads=current in _revisions_before(LEDGER_TREE),
                       attest_as_found=current in _revisions_before(ATTESTED_PRUNES))


LEDGER_TREE = "0013_ledger_tree"
ATTESTED_PRUNES = "0027_ledger_attested_prunes"


def migrate_with_alembic(database_url: str) -> None:
    """Run the migrations the database lacks, whatever its state (an empty one gets all of them)."""
    from alembic import command

    config = alembic_config(database_url)
    if not make_url(database_url).drivername.startswith("sqlite"):
        command.upgrade(config, "head")
        return
    engine = sqlite_ddl_engine(database_url)
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection  # migrations/env.py runs on it
            command.upgrade(config, "head")
            connection.commit()
    finally:
        engine.dispose()


def create_at_newest(database_url: str, newest: str) -> bool:
    """On a database without any table: create the models' schema and stamp it `newest`, in one transaction.

    False (and nothing written) when the database already holds a table.
    """
    if not make_url(database_url).drivername.startswith("sqlite"):
        return asyncio.run(_create_at_newest_async(database_url, newest))
    engine = sqlite_ddl_engine(database_url)
    try:
        with engine.begin() as connection:
            return _create_schema(connection, newest)
    finally:
        engine.dispose()


async def _create_at_newest_async(database_url: str, newest: str) -> bool:
    engine = one_shot_engine(database_url)
    try:
        async with engine.begin() as connection:  # PostgreSQL's DDL is transactional: all or nothing
            return await connection.run_sync(_create_schema, newest)
    finally:
        await engine.dispose()


def _create_schema(connection: Connection, newest: str) -> bool:
    from prism.tables import metadata  # every model's table

    if inspect(connection).get_table_names():
        return False
    metadata.create_all(connection, checkfirst=False)
    _VERSION_TABLE.create(connection)
    connection.execute(_VERSION_TABLE.insert().values(version_num=newest))
    return True


def sqlite_ddl_engine(database_url: str) -> Engine:
    """SQLite for schema changes: the standard library's driver in this thread, one real transaction.

    Through the async driver every DDL statement is a hop to its thread and back. And the standard driver
    opens no transaction for DDL, so each CREATE/ALTER would commit (and sync the file) on its own: about
    1.2 ms a statement, 0.17 s of a full migration. BEGIN is sent explicitly, as SQLAlchemy's SQLite
    documentation recommends; the whole change then commits once. Foreign keys stay off, as Alembic's batch
    mode needs: it rebuilds a table by dropping it, which with them on deletes every row that references it
    (ON DELETE CASCADE).
    """
    engine = create_engine(make_url(database_url).set(drivername="sqlite"), poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN")

    return engine


async def upgrade_async(database_url: str) -> None:
    # Alembic's env starts its own event loop; keep it off ours.
    await asyncio.to_thread(upgrade, database_url)


def _revisions_before(revision: str) -> set[str]:
    """Every revision `revision` builds on, directly or not."""
    parent_of: dict[str, str] = {}
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict(_REVISION_LINE.findall(script.read_text(encoding="utf-8")))
        if "revision" in found and "down_revision" in found:
            parent_of[found["revision"]] = found["down_revision"]
    before: set[str] = set()
    while revision in parent_of and parent_of[revision] not in before:
        revision = parent_of[revision]
        before.add(revision)
    return before


def newest_revision() -> str | None:
    """The one revision no other script builds on; None when the scripts do not name exactly one."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for kind, value in _REVISION_LINE.findall(script.read_text(encoding="utf-8")):
            (revisions if kind == "revision" else parents).add(value)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def database_revision(database_url: str) -> str | None:
    """The revision recorded in the database; None when it has none (empty, or not reachable yet)."""

    async def read() -> str | None:
        engine = one_shot_engine(database_url)
        try:
            async with engine.connect() as connection:
                rows = (await connection.execute(text("SELECT version_num FROM alembic_version"))).all()
        except (SQLAlchemyError, OSError):  # Alembic, run next, reports these in its own words
            return None
        finally:
            await engine.dispose()
        return str(rows[0][0]) if len(rows) == 1 else None

    return asyncio.run(read())
