"""Each change of an organization's integrations makes every process rebuild its registry and search index, work
every organization shares, so its changes count against PRISM_RATE_LIMIT_INTEGRATION_CHANGES (docs/integrations.md).
A change its upstream MCP server announces during a call (notifications/tools/list_changed) is one too: it was
stored, and the generation bumped, on every call, counted nowhere. Past the window the stored list serves and the
integration is `stale`, saying why."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.config import Settings
from prism.integrations.models import IntegrationApp
from prism.integrations.runtime import read_generation
from prism.ratelimit.limiter import build_limiter
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import post
from tests.integrations_mcp_upstream import (
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import upstream_tls_fixture  # noqa: F401

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


async def test_tool_list_changes_an_upstream_announces_are_counted_as_changes(
        app: Any, client: httpx.AsyncClient, settings: Settings, factory: Factory, db: Database,
        scripted: ScriptedMcp, monkeypatch: pytest.MonkeyPatch) -> None:
    # The served app's dispatcher counts with a limiter of its own, three changes a minute.
    monkeypatch.setattr(app.state.dispatcher, "limiter",
                        build_limiter(settings.model_copy(update={"rate_limit_integration_changes": 3})))
    ws = await factory.workspace(roles=("owner", "member"))
    name = "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = [{"name": "ping", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]
    scripted.announcing = {"ping"}
    added = await post(client, ws, "config_manage/integrations/integration/addMcp",
                       {"name": name, "url": scripted.url, "transport": "streamable_http"})  # 1 of 3
    assert added.status_code == 200, added.text
    async with db.read() as session:
        generation_before = await read_generation(session)
    for n in range(6):  # the upstream lists one more tool with every answer, and says so
        scripted.tools = [*scripted.tools, {"name": f"extra_{n}", "inputSchema": {"type": "object"}}]
        called = await post(client, ws, f"integration_call/{name}/tool/ping", {}, label="member")
        assert called.status_code == 200, called.text[:300]
    async with db.read() as session:
        stored = (await session.execute(select(IntegrationApp).where(IntegrationApp.name == name))).scalar_one()
        generation_after = await read_generation(session)
    assert stored.revision == 3 and generation_after - generation_before == 2, (stored.revision, generation_after)
    assert stored.status == "stale" and "changed its integrations" in (stored.last_error or ""), stored.last_error
