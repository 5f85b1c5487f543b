"""Changes to an organization's integrations are counted per organization (PRISM_RATE_LIMIT_INTEGRATION_CHANGES):
each makes every process rebuild its registry and search index, work all organizations share, so one
organization importing as fast as its request ceiling allows could keep every process busy rebuilding. A change
over the ceiling is refused 429 before its description is fetched or compiled, and audited; other organizations
and the organization's other calls are not held to it. On the memory limiter and on Redis."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.apps.integrations import imports
from prism.config import Settings
from prism.integrations.models import IntegrationApp
from prism.models import AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import post
from tests.limits_support import client_for, limited_app

WAREHOUSE = (Path(__file__).parent / "fixtures" / "integrations" / "warehouse.yaml").read_text()
IMPORT = "config_manage/integrations/integration/importOpenapi"
REMOVE = "config_manage/integrations/integration/remove"
LIST = "config_manage/integrations/integration/list"

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


def _name() -> str:
    return "lim_" + uuid.uuid4().hex[:10]


async def _import(client: httpx.AsyncClient, ws: Workspace, name: str) -> httpx.Response:
    return await post(client, ws, IMPORT, {"name": name, "spec": WAREHOUSE})


async def test_an_organization_over_its_integration_changes_is_refused_before_compiling(
        app: Any, settings: Settings, factory: Factory, db: Database, limiter_storage: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[int] = []
    compile_apart = imports.compile_apart

    async def counted(text: Any, **options: Any) -> Any:
        compiled.append(1)
        return await compile_apart(text, **options)

    monkeypatch.setattr(imports, "compile_apart", counted)
    busy = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    first, second, refused_name = _name(), _name(), _name()
    async with limited_app(settings, app, rate_limit_integration_changes=2, **limiter_storage) as limited, \
            client_for(limited, address=f"203.0.113.{uuid.uuid4().int % 200 + 20}") as client:
        assert (await _import(client, busy, first)).status_code == 200
        assert (await _import(client, busy, second)).status_code == 200
        refused = await _import(client, busy, refused_name)
        removal = await post(client, busy, REMOVE, {"name": first})
        listed = await post(client, busy, LIST, {})
        others = await _import(client, other, _name())

    assert refused.status_code == 429, refused.text
    body = refused.json()
    assert body["success"] is False and body["error"] == "rate_limited"
    assert "integration_changes" in body["message"]
    assert refused.headers["RateLimit-Limit"] == "2" and int(refused.headers["Retry-After"]) >= 1
    assert removal.status_code == 429 and removal.json()["error"] == "rate_limited"  # a removal is a change too
    assert len(compiled) == 3  # the two imports of the busy organization and the other's: not the refused one
    assert listed.status_code == 200  # reading its integrations is not a change
    assert others.status_code == 200, others.text  # another organization has its own count
    async with db.read() as session:
        stored = set((await session.execute(select(IntegrationApp.name).where(
            IntegrationApp.owner_organization_id == busy.org.id))).scalars())
        audited = [tuple(row) for row in (await session.execute(
            select(AuditEntry.coordinate, AuditEntry.outcome, AuditEntry.error_code)
            .where(AuditEntry.organization_id == busy.org.id, AuditEntry.coordinate.in_((IMPORT, REMOVE)))
            .order_by(AuditEntry.created_at))).all()]
    assert stored == {first, second}  # the refused import stored nothing, the refused removal removed nothing
    assert audited == [(IMPORT, "allowed", None), (IMPORT, "allowed", None),
                       (IMPORT, "refused", "rate_limited"), (REMOVE, "refused", "rate_limited")]


async def test_a_keyed_change_refused_for_the_limit_is_not_its_keys_answer(
        app: Any, settings: Settings, factory: Factory, limiter_storage: dict[str, Any]) -> None:
    """A 429 tells the client to retry after Retry-After with the same key: that retry must run, not replay the
    429 (docs/idempotency.md: rate limits are never a key's answer)."""
    ws = await factory.workspace(roles=("owner",))
    keyed = {"Idempotency-Key": uuid.uuid4().hex}
    address = f"203.0.113.{uuid.uuid4().int % 200 + 20}"
    name = _name()
    async with limited_app(settings, app, rate_limit_integration_changes=1, **limiter_storage) as limited, \
            client_for(limited, address=address) as client:
        assert (await _import(client, ws, _name())).status_code == 200
        refused = await post(client, ws, IMPORT, {"name": name, "spec": WAREHOUSE}, headers=keyed)
    # A minute later, as far as the counts go: another process's fresh counters (memory), or the next window.
    counts = {**limiter_storage, "redis_url": None} if limiter_storage else {}
    async with limited_app(settings, app, rate_limit_integration_changes=1, **counts) as later, \
            client_for(later, address=address) as client:
        retried = await post(client, ws, IMPORT, {"name": name, "spec": WAREHOUSE}, headers=keyed)
    assert refused.status_code == 429, refused.text
    assert retried.status_code == 200, retried.text
    assert "idempotent-replayed" not in retried.headers and retried.json()["data"]["created"] is True


async def test_a_replayed_keyed_change_is_not_counted_again(
        app: Any, settings: Settings, factory: Factory, limiter_storage: dict[str, Any]) -> None:
    ws = await factory.workspace(roles=("owner",))
    first, second = _name(), _name()
    keyed = {"Idempotency-Key": uuid.uuid4().hex}
    async with limited_app(settings, app, rate_limit_integration_changes=3, **limiter_storage) as limited, \
            client_for(limited, address=f"203.0.113.{uuid.uuid4().int % 200 + 20}") as client:
        assert (await _import(client, ws, first)).status_code == 200  # 1
        removed = await post(client, ws, REMOVE, {"name": first}, headers=keyed)  # 2
        replayed = await post(client, ws, REMOVE, {"name": first}, headers=keyed)  # a replay: not counted
        third = await _import(client, ws, second)  # 3
    assert removed.status_code == 200, removed.text
    assert replayed.status_code == 200 and replayed.headers.get("idempotent-replayed") == "true", replayed.text
    assert third.status_code == 200, third.text
