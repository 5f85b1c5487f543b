"""Integration revisions under concurrent imports: each process keeps the app it built by (integration,
revision), so two imports racing from two processes must get a revision each, never one revision for two sets
of operations; the later import starts from the earlier one's operations."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from prism.config import Settings
from prism.integrations import service
from prism.storage import Database
from tests.concurrent_writers import until_waiting
from tests.factories import Factory
from tests.processes import TEST_SECRET_KEY_FILE

SETTINGS = Settings(secret_key_file=str(TEST_SECRET_KEY_FILE))


def _spec(*paths: str) -> str:
    operations = {f"/{path}": {"get": {"operationId": f"get_{path}", "responses": {}}} for path in paths}
    return json.dumps({"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": operations})


async def _import(db: Database, name: str, organization_id: str, spec: str) -> dict[str, Any]:
    async with db.write() as session:
        return await service.store_openapi(session, SETTINGS, name, service.compile_openapi(spec), source="test",
                                           owner_organization_id=organization_id, installed=frozenset())


async def test_two_imports_racing_from_two_processes_get_two_revisions(
        factory: Factory, db: Database, database_url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = f"racing_{uuid.uuid4().hex[:8]}"
    assert (await _import(db, name, ws.org.id, _spec("parts")))["revision"] == 1
    other_process = Database(database_url)
    try:
        async with db.write() as session:
            first = await service.store_openapi(session, SETTINGS, name,
                                                service.compile_openapi(_spec("parts", "orders")), source="test",
                                                owner_organization_id=ws.org.id, installed=frozenset())
            second_import = asyncio.create_task(_import(other_process, name, ws.org.id, _spec("parts", "stock")))
            await until_waiting(db, second_import)
        second = await second_import
    finally:
        await other_process.dispose()
        async with db.write() as session:
            await service.remove(session, name, owner_organization_id=ws.org.id)

    assert (first["revision"], first["added"], first["removed"]) == (2, ["orders/getOrders"], [])
    # The second import waited for the first and compared against its operations.
    assert (second["revision"], second["added"], second["removed"]) == (3, ["stock/getStock"], ["orders/getOrders"])
