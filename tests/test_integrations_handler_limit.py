"""Every process holds every organization's imported handlers, connected or not; an import and the rate of changes
were bounded, how many handlers one organization keeps was not. PRISM_INTEGRATION_HANDLERS_PER_ORGANIZATION bounds
them: an import, a re-import, an added upstream MCP server and a tool list it announces are refused past it
(409 integration_handlers_exceeded, naming the numbers), the stored list then serving on. Real HTTPS upstreams on
loopback; the suite's engine."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import select

from prism.config import Settings
from prism.errors import PrismError
from prism.integrations.mcp_upstream import operations_of
from prism.integrations.models import IntegrationApp
from prism.integrations.service import add_mcp
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


async def test_two_imports_at_once_cannot_both_pass_the_limit(settings: Settings, factory: Factory,
                                                               db: Database) -> None:
    """Each import counts the organization's other integrations' handlers; two committing at once on PostgreSQL each
    counted without the other and both passed (6 of a limit of 5). The count now waits for the other's commit."""
    ws = await factory.workspace(roles=("owner",))
    names = ["many_" + uuid.uuid4().hex[:8] for _ in range(2)]
    operations = operations_of(tools(3), "streamable_http")
    first_stored, first_may_commit = asyncio.Event(), asyncio.Event()

    async def add(name: str, *, hold: bool) -> dict[str, Any] | PrismError:
        try:
            async with db.write() as session:
                report = await add_mcp(session, settings, name, "https://mcp.example.com/mcp", operations,
                                       owner_organization_id=ws.org.id, installed=frozenset())
                if hold:
                    first_stored.set()
                    await first_may_commit.wait()
                return report
        except PrismError as refusal:
            return refusal

    first = asyncio.create_task(add(names[0], hold=True))
    await first_stored.wait()
    second = asyncio.create_task(add(names[1], hold=False))
    await asyncio.sleep(0.3)  # the second's count runs now, or waits for the first's commit
    first_may_commit.set()
    outcomes = [await first, await second]
    assert isinstance(outcomes[0], dict) and isinstance(outcomes[1], PrismError), outcomes
    assert outcomes[1].code == "integration_handlers_exceeded"
    async with db.read() as session:
        kept = (await session.execute(select(IntegrationApp.name).where(IntegrationApp.name.in_(names)))).scalars()
        assert list(kept) == [names[0]]
