"""Apply Alembic migrations programmatically (used by `prism migrate` and `prism serve`).

Every start of `prism serve` migrates first. On a database already at the newest revision that is a
no-op, yet Alembic would still import itself and load every migration script to find that out (about a
third of a second); `upgrade` first compares the database's revision with the newest one, read straight
from the scripts' `revision`/`down_revision` lines, and runs Alembic only when they differ.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from prism.db import one_shot_engine

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


def upgrade(database_url: str) -> None:
    newest = newest_revision()
    if newest is not None and database_revision(database_url) == newest:
        return
    from alembic import command

    config = alembic_config(database_url)
    url = make_url(database_url)
    if not url.drivername.startswith("sqlite"):
        command.upgrade(config, "head")
        return
    # SQLite: Alembic runs over the standard library's driver, in this thread. Through the async driver
    # every DDL statement is a hop to its thread and back: an empty database took 0.45 s to migrate, 0.1 s so.
    engine = create_engine(url.set(drivername="sqlite"), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection  # migrations/env.py runs on it
            command.upgrade(config, "head")
            connection.commit()
    finally:
        engine.dispose()


async def upgrade_async(database_url: str) -> None:
    # Alembic's env starts its own event loop; keep it off ours.
    await asyncio.to_thread(upgrade, database_url)


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
