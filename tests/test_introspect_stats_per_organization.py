"""introspect dimension=stats: `handlers_total` counts the handlers that exist for the caller's organization, its
enabled integrations included. The answer's counts are kept per view, which every caller seeing the same handlers
shares, in any organization: another organization's total (its private integration counted) was answered."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import ok

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

INTROSPECT = "report_query/core/registry/introspect"


def spec(name: str) -> str:
    paths = {f"/widgets/{i}": {"get": {"operationId": f"getWidget{i}", "summary": f"Widget {i}",
                                        "responses": {"200": {"description": "ok"}}}} for i in range(7)}
    return json.dumps({"openapi": "3.0.3", "info": {"title": name, "version": "1"},
                       "servers": [{"url": "https://upstream.example.com"}], "paths": paths})


async def test_stats_handlers_total_is_the_callers_organizations_own(
        client: httpx.AsyncClient, factory: Factory, app: Any) -> None:
    a = await factory.workspace(roles=("owner", "member"))
    b = await factory.workspace(roles=("owner", "member"))
    name = "zs_" + uuid.uuid4().hex[:10]
    await ok(client, a, "config_manage/integrations/integration/importOpenapi", {"name": name, "spec": spec(name)})
    await ok(client, a, "config_manage/integrations/connection/set", {"name": name, "base_url": "https://93.184.215.14"})
    # The same narrow role in both organizations: integration handlers are hidden from it, so both see the same
    # handlers (and share one TreeView).
    for ws in (a, b):
        await factory.give_role(ws, "member", "finance_viewer", ["finance.view_*"])
    built_in = len([h for h in app.state.registry if h.integration is None])

    stats_a = await ok(client, a, INTROSPECT, {"dimension": "stats"}, label="member")
    stats_b = await ok(client, b, INTROSPECT, {"dimension": "stats"}, label="member")
    assert stats_a["handlers"] == stats_b["handlers"]  # same visible set
    assert stats_a["handlers_total"] == built_in + 7
    # B enabled nothing: only the built-in handlers exist for it. It is told A's number instead.
    assert stats_b["handlers_total"] == built_in, (stats_b["handlers_total"], built_in)
