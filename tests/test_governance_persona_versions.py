"""Persona versions under concurrent changes: compiled matchers are cached by (persona, version), so two changes
racing from two processes (the CLI and the API) must get a version each, never one version for two sets of
rules; the later change starts from the earlier one's row."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import select

from prism.governance.models import Persona
from prism.governance.personas import PersonaChanges, update_persona
from prism.storage import Database
from tests.concurrent_writers import until_waiting
from tests.factories import Factory
from tests.governance_support import ok

FINANCE = ["entity_crud/finance/*/*"]
ITSM = ["entity_crud/itsm/*/*"]


async def _update(db: Database, organization_id: str, persona_id: str, changes: PersonaChanges) -> dict[str, Any]:
    async with db.write() as session:
        return await update_persona(session, organization_id=organization_id, persona_id=persona_id,
                                    changes=changes)


async def test_two_updates_racing_from_two_processes_get_two_versions(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    created = await ok(client, ws, "config_manage/governance/persona/create", {"name": "racing"})
    version = created["version"]
    other_process = Database(database_url)
    try:
        async with db.write() as session:
            first = await update_persona(session, organization_id=ws.org.id, persona_id=created["id"],
                                         changes=PersonaChanges(description="finance only", allow=FINANCE))
            second_update = asyncio.create_task(
                _update(other_process, ws.org.id, created["id"], PersonaChanges(allow=ITSM)))
            await until_waiting(db, second_update)
        second = await second_update
    finally:
        await other_process.dispose()

    assert (first["version"], first["allow"]) == (version + 1, FINANCE)
    # The second change waited for the first and started from its row: the next version, the first's
    # description kept, its own rules.
    assert (second["version"], second["allow"], second["description"]) == (version + 2, ITSM, "finance only")
    async with db.read() as session:
        stored = (await session.execute(select(Persona).where(Persona.id == created["id"]))).scalar_one()
    assert (stored.version, stored.allow, stored.description) == (version + 2, ITSM, "finance only")
