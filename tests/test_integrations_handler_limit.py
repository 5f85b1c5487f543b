"""Every process holds every organization's imported handlers, connected or not; an import and the rate of changes
were bounded, how many handlers one organization keeps was not. PRISM_INTEGRATION_HANDLERS_PER_ORGANIZATION bounds
them: an import, a re-import, an added upstream MCP server and a tool list it announces are refused past it
(409 integration_handlers_exceeded, naming the numbers), the stored list then serving on. Real HTTPS upstreams on
loopback; the suite's engine."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import select

from prism.config import Settings
from prism.integrations.models import IntegrationApp
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.integrations_mcp_upstream import (
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import upstream_tls_fixture  # noqa: F401 -- fixture: a loopback upstream's TLS

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

LIMIT = 5


@pytest.fixture(autouse=True)
def limited(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "integration_handlers_per_organization", LIMIT)


def spec(operations: int) -> dict[str, Any]:
    paths = {f"/r{i}": {"get": {"operationId": f"read{i}", "tags": ["r"], "responses": {"200": {"description": "ok"}}}}
             for i in range(operations)}
    return {"openapi": "3.0.3", "info": {"title": "Many", "version": "1"}, "paths": paths}


async def imported(client: httpx.AsyncClient, ws: Workspace, name: str, operations: int) -> httpx.Response:
    return await post(client, ws, "config_manage/integrations/integration/importOpenapi",
                      {"name": name, "spec": spec(operations)})


def refused(answer: httpx.Response, handlers: int) -> bool:
    body = answer.json()
    return (answer.status_code, body["error"], body["details"]) == (
        409, "integration_handlers_exceeded", {"limit": LIMIT, "handlers": handlers}) and (
        f"{handlers} handlers" in body["message"] and f"limit of {LIMIT}" in body["message"])


async def test_imports_and_re_imports_past_the_organizations_limit_are_refused(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    first, second = ("many_" + uuid.uuid4().hex[:8] for _ in range(2))
    assert (await imported(client, ws, first, 3)).status_code == 200

    over = await imported(client, ws, second, 3)
    assert refused(over, 6), over.text
    grown = await imported(client, ws, first, 6)  # a re-import counts the new operations, not the old ones
    assert refused(grown, 6), grown.text
    assert (await imported(client, ws, first, LIMIT)).status_code == 200  # up to the limit, in place
    assert (await imported(client, other, second, 3)).status_code == 200  # another organization has its own


async def test_the_limit_is_a_positive_number() -> None:
    with pytest.raises(ValidationError):
        Settings(integration_handlers_per_organization=0)


def tools(count: int) -> list[dict[str, Any]]:
    return [{"name": f"t{i}", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
            for i in range(count)]


async def test_an_upstream_mcp_server_past_the_limit_is_refused_added_or_announced(
        client: httpx.AsyncClient, factory: Factory, db: Database, scripted: ScriptedMcp) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = tools(LIMIT + 1)
    adding = {"name": name, "url": scripted.url, "transport": "streamable_http"}
    too_many = await post(client, ws, "config_manage/integrations/integration/addMcp", adding)
    assert refused(too_many, LIMIT + 1), too_many.text

    scripted.tools = tools(2)
    await ok(client, ws, "config_manage/integrations/integration/addMcp", adding)
    scripted.tools, scripted.announcing = tools(LIMIT + 1), {"t0"}
    called = await ok(client, ws, f"integration_call/{name}/tool/t0", {})  # the call itself went through
    assert called["content"], called

    async with db.read() as session:
        app = (await session.execute(select(IntegrationApp).where(IntegrationApp.name == name))).scalar_one()
    assert (app.revision, len(app.operations), app.status) == (1, 2, "stale")
    assert f"{LIMIT + 1} handlers" in app.last_error and "revision 1 still serves" in app.last_error
