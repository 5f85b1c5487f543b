"""An organization's import of a description given by URL (docs/integrations.md, "Compiled before the
transaction"): fetched and compiled before the call's ledger unit, so its one audit entry says what its answer
says — a description that cannot be fetched or compiled, or a name that is taken, is a refused call, never an
allowed entry followed by an error. And a repeat of an import with an Idempotency-Key replays the first answer
without fetching or compiling anything again (docs/idempotency.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from prism.apps.integrations import imports
from prism.idempotency import ticket
from prism.idempotency.models import IdempotencyRecord
from prism.integrations.models import IntegrationApp
from prism.kit.timeutil import utcnow
from prism.models import AuditEntry
from prism.storage import Database
from tests.description_server import (  # noqa: F401 -- fixtures: descriptions served over HTTPS on loopback
    VALID,
    Descriptions,
    descriptions_fixture,
    upstream_tls_fixture,
)
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

IMPORT = "config_manage/integrations/integration/importOpenapi"


async def audited(db: Database, ws: Workspace) -> list[tuple[str, str | None]]:
    async with db.read() as session:
        rows = (await session.execute(select(AuditEntry.outcome, AuditEntry.error_code).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.coordinate == IMPORT)
            .order_by(AuditEntry.created_at))).all()
    return [(outcome, code) for outcome, code in rows]


def unique() -> str:
    return "byurl_" + uuid.uuid4().hex[:10]


async def test_an_import_by_url_that_fails_is_audited_as_refused(
        client: httpx.AsyncClient, factory: Factory, db: Database, descriptions: Descriptions) -> None:
    ws = await factory.workspace(roles=("owner",))
    holder = await factory.workspace(roles=("owner",))
    taken = unique()
    await ok(client, holder, IMPORT, {"name": taken, "url": descriptions.url("valid.json")})

    invalid = await post(client, ws, IMPORT, {"name": unique(), "url": descriptions.url("no-operation.json")})
    assert invalid.status_code == 400 and invalid.json()["error"] == "invalid_openapi", invalid.text
    missing = await post(client, ws, IMPORT, {"name": unique(), "url": descriptions.url("missing.json")})
    assert missing.status_code == 502 and missing.json()["error"] == "upstream_error", missing.text
    clash = await post(client, ws, IMPORT, {"name": taken, "url": descriptions.url("valid.json")})
    assert clash.status_code == 409 and clash.json()["error"] == "conflict", clash.text
    name = unique()
    imported = await ok(client, ws, IMPORT, {"name": name, "url": descriptions.url("valid.json")})
    assert imported["created"] and imported["handlers"] == 1

    assert await audited(db, ws) == [("refused", "invalid_openapi"), ("refused", "upstream_error"),
                                     ("refused", "conflict"), ("allowed", None)]
    async with db.read() as session:
        stored = (await session.execute(select(IntegrationApp.source, IntegrationApp.owner_organization_id)
                                        .where(IntegrationApp.name == name))).one()
    assert tuple(stored) == (descriptions.url("valid.json"), ws.org.id)


async def test_a_repeated_import_with_an_idempotency_key_replays_without_fetching_or_compiling(
        client: httpx.AsyncClient, factory: Factory, db: Database, descriptions: Descriptions,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("owner",))
    compiled: list[str] = []
    compile_apart = imports.compile_apart

    async def counted(text: Any, **options: Any) -> Any:
        compiled.append("compiled")
        return await compile_apart(text, **options)

    monkeypatch.setattr(imports, "compile_apart", counted)
    for arguments in ({"name": unique(), "url": descriptions.url("valid.json")},
                      {"name": unique(), "spec": VALID}):
        compiled.clear()
        descriptions.fetched.clear()
        key = {"Idempotency-Key": str(uuid.uuid4())}
        first = await post(client, ws, IMPORT, arguments, headers=key)
        again = await post(client, ws, IMPORT, arguments, headers=key)
        assert first.status_code == again.status_code == 200, again.text
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.json()["data"] == first.json()["data"]
        assert compiled == ["compiled"], arguments
        assert descriptions.fetched["valid.json"] == (1 if "url" in arguments else 0)
    # A refusal is replayed without fetching again either.
    descriptions.fetched.clear()
    key = {"Idempotency-Key": str(uuid.uuid4())}
    refused = {"name": unique(), "url": descriptions.url("no-operation.json")}
    refusals = [await post(client, ws, IMPORT, refused, headers=key) for _ in range(2)]
    assert [r.status_code for r in refusals] == [400, 400]
    assert descriptions.fetched["no-operation.json"] == 1


async def test_a_repeat_that_finds_the_key_expired_when_its_turn_comes_is_refused_and_runs_when_sent_again(
        client: httpx.AsyncClient, factory: Factory, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repeat skipped its preparation because the key's row was there; when its unit finds the row expired
    it cannot run unprepared: 503 (not the key's answer), and sending it again runs the call."""
    ws = await factory.workspace(roles=("owner",))
    arguments, key = {"name": unique(), "spec": VALID}, {"Idempotency-Key": str(uuid.uuid4())}
    assert (await post(client, ws, IMPORT, arguments, headers=key)).status_code == 200
    async with db.write() as session:
        await session.execute(update(IdempotencyRecord).values(expires_at=utcnow() - timedelta(seconds=1)))
    # As if the row had expired between the check and the unit: it is still taken as held.
    monkeypatch.setattr(ticket, "HELD_MARGIN", timedelta(days=-2))
    expired = await post(client, ws, IMPORT, arguments, headers=key)
    assert expired.status_code == 503 and expired.json()["error"] == "idempotency_key_expired", expired.text
    monkeypatch.undo()
    again = await post(client, ws, IMPORT, arguments, headers=key)
    assert again.status_code == 200 and "idempotent-replayed" not in again.headers, again.text
    assert again.json()["data"]["created"] is False
