"""An organization's OpenAPI import is compiled before its ledger unit, in a child process: the ledger's batch
(which every call of the process waits on) only stores the result, so another organization's call commits
while a large description is still being compiled. The import stays one audited, atomic change."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.apps.integrations import imports
from prism.integrations.models import IntegrationApp
from prism.models import AuditEntry
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok, post

WAREHOUSE = Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml"
IMPORT = "config_manage/integrations/integration/importOpenapi"
# How long the held compilation waits to be released before going on alone: reached only when the release
# could not come (the event loop or the ledger stood still while compiling), which fails the test.
HOLD_SECONDS = 30.0

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


async def test_another_organizations_call_commits_while_an_import_is_being_compiled(
        client: httpx.AsyncClient, factory: Factory, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    importer = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    compiling, release = asyncio.Event(), asyncio.Event()
    order: list[str] = []
    compile_apart = imports.compile_apart

    async def held_compilation(text: Any, **options: Any) -> Any:
        """The real compilation, held until the test has seen the other organization's call answered."""
        compiling.set()
        try:
            await asyncio.wait_for(release.wait(), HOLD_SECONDS)
            order.append("compiled")
        except TimeoutError:
            order.append("compiled without waiting for the release")
        return await compile_apart(text, **options)

    monkeypatch.setattr(imports, "compile_apart", held_compilation)
    name = "wh_" + uuid.uuid4().hex[:10]
    importing = asyncio.create_task(post(client, importer, IMPORT, {"name": name, "spec": WAREHOUSE.read_text()}))
    await asyncio.wait_for(compiling.wait(), HOLD_SECONDS)
    part = await ok(client, other, "entity_crud/spare_parts/spare_part/create", {"sku": "B7", "name": "bolt"})
    order.append("the other organization's call answered")
    release.set()
    imported = await importing

    assert order == ["the other organization's call answered", "compiled"]
    assert part["sku"] == "B7"
    assert imported.status_code == 200, imported.text
    assert imported.json()["data"]["created"] is True and imported.json()["data"]["handlers"] > 0
    async with db.read() as session:
        stored = (await session.execute(select(IntegrationApp.owner_organization_id)
                                        .where(IntegrationApp.name == name))).scalar_one()
        audited = (await session.execute(select(AuditEntry.outcome, AuditEntry.error_code).where(
            AuditEntry.organization_id == importer.org.id, AuditEntry.coordinate == IMPORT)
        )).all()
    assert stored == importer.org.id
    assert [tuple(a) for a in audited] == [("allowed", None)]


async def test_a_description_that_does_not_compile_is_refused_in_the_ledger_as_before(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """What compiling raised is raised where the handler runs: the call is refused and audited as such, and
    nothing is stored."""
    ws = await factory.workspace(roles=("owner",))
    name = "wh_" + uuid.uuid4().hex[:10]
    refused = await post(client, ws, IMPORT, {"name": name, "spec": "openapi: 3.0.3\ninfo: {title: x}\npaths: {}\n"})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_openapi", refused.text
    unreadable = await post(client, ws, IMPORT, {"name": name, "spec": "{not json: ["})
    assert unreadable.status_code == 400 and unreadable.json()["error"] == "invalid_openapi", unreadable.text
    async with db.read() as session:
        audited = (await session.execute(select(AuditEntry.outcome, AuditEntry.error_code).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.coordinate == IMPORT)
            .order_by(AuditEntry.created_at))).all()
        stored = (await session.execute(select(IntegrationApp.id).where(IntegrationApp.name == name))).first()
    assert [tuple(a) for a in audited] == [("refused", "invalid_openapi")] * 2
    assert stored is None
