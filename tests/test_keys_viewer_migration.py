"""Migration 0022 gives the tenants' built-in viewer roles `keys.add_key` and `keys.change_key`, so viewers keep
minting and revoking their own keys now that every path checks them; a viewer role an operator changed is left
as it is, and stepping down gives the old patterns back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from sqlalchemy import select, update

from prism.migrate import alembic_config, migrate_with_alembic
from prism.models import Role
from prism.storage import Database, one_shot_engine
from tests.factories import Factory
from tests.migration_support import with_app_db
from tests.processes import scratch_database

BEFORE = "0021_documents_postings"
OLD_VIEWER, NEW_VIEWER = ["*.view_*"], ["*.view_*", "keys.add_key", "keys.change_key"]
CHANGED = ["*.view_*", "reports.run_report"]


async def _viewers(url: str, tenant_ids: list[str]) -> list[list[str]]:
    """The viewer roles' patterns as stored, read without starting Prism (which would upgrade first)."""
    engine = one_shot_engine(url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(select(Role.tenant_id, Role.permissions).where(
                Role.name == "viewer", Role.tenant_id.in_(tenant_ids)))).all()
    finally:
        await engine.dispose()
    by_tenant = {tenant_id: list(permissions) for tenant_id, permissions in rows}
    return [by_tenant[t] for t in tenant_ids]


async def test_the_upgrade_gives_built_in_viewers_their_own_keys_and_leaves_changed_ones(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "viewers") as url:
        await asyncio.to_thread(migrate_with_alembic, url)

        async def fill(db: Database) -> list[str]:
            older, changed = await Factory(db).workspace(roles=()), await Factory(db).workspace(roles=())
            async with db.write() as session:  # as an older Prism stored it, and as an operator changed it
                for ws, patterns in ((older, OLD_VIEWER), (changed, CHANGED)):
                    await session.execute(update(Role).where(Role.tenant_id == ws.tenant.id, Role.name == "viewer")
                                          .values(permissions=patterns))
            return [older.tenant.id, changed.tenant.id]

        tenants = await with_app_db(url, fill)
        config = alembic_config(url)
        await asyncio.to_thread(command.downgrade, config, BEFORE)
        assert await _viewers(url, tenants) == [OLD_VIEWER, CHANGED]  # nothing to step down from
        await asyncio.to_thread(command.upgrade, config, "head")
        assert await _viewers(url, tenants) == [NEW_VIEWER, CHANGED]
        await asyncio.to_thread(command.downgrade, config, BEFORE)
        assert await _viewers(url, tenants) == [OLD_VIEWER, CHANGED]
