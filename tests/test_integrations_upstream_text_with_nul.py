"""Calls whose outbound part runs after the commit: whatever an upstream answers, the caller gets an answer in
the documented shape (never a 500) and the call keeps its record (integration_calls)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.types import Receive, Scope, Send

from prism.integrations.models import IntegrationApp, IntegrationCall
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import post
from tests.integrations_mcp_upstream import ScriptedMcp
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    upstream_tls_fixture,
)
from tests.webhooks_receiver import Answer, Receiver, RunningReceiver, TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


class ErringMcp(ScriptedMcp):
    """A scripted MCP server whose tools in `errors` answer a JSON-RPC error with that message."""

    def __init__(self, tls: TlsFiles) -> None:
        self.errors: dict[str, str] = {}
        super().__init__(tls)

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body) if body else {}
        name = (request.get("params") or {}).get("name")
        if request.get("method") == "tools/call" and name in self.errors:
            self.calls.append(name)
            answer = {"jsonrpc": "2.0", "id": request["id"],
                      "error": {"code": -32000, "message": self.errors[name]}}
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"application/json"), (b"mcp-session-id", b"scripted")]})
            await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await super()._app(scope, replay, send)


@pytest.fixture
async def erring(tls: TlsFiles) -> AsyncIterator[ErringMcp]:
    running = await ErringMcp(tls).start()
    yield running
    await running.stop()


@pytest.fixture
async def receiver(tls: TlsFiles) -> AsyncIterator[Receiver]:
    running = RunningReceiver(tls)
    yield await running.start()
    await running.stop()


async def _records(db: Database, organization_id: str) -> list[Any]:
    async with db.read() as session:
        return list((await session.execute(select(IntegrationCall.outcome, IntegrationCall.error).where(
            IntegrationCall.organization_id == organization_id))).all())


async def test_an_upstream_mcp_error_with_a_nul_character_is_a_502_and_recorded(
        client: httpx.AsyncClient, factory: Factory, db: Database, erring: ErringMcp) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    erring.tools = [{"name": "explode", "inputSchema": {"type": "object"}}]
    erring.errors["explode"] = "broken\x00here"
    added = await post(client, ws, "config_manage/integrations/integration/addMcp",
                       {"name": name, "url": erring.url, "transport": "streamable_http"})
    assert added.status_code == 200, added.text[:300]
    refused = await post(client, ws, f"integration_call/{name}/tool/explode", {})
    assert erring.calls == ["explode"]
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert [r.outcome for r in await _records(db, ws.org.id)] == ["upstream_error"]


async def test_an_mcp_tool_named_with_a_nul_character_is_called_and_recorded(
        client: httpx.AsyncClient, factory: Factory, db: Database, erring: ErringMcp) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    erring.tools = [{"name": "odd\x00tool", "inputSchema": {"type": "object"}}]
    added = await post(client, ws, "config_manage/integrations/integration/addMcp",
                       {"name": name, "url": erring.url, "transport": "streamable_http"})
    assert added.status_code == 200, added.text[:300]
    [operation] = added.json()["data"]["added"]
    called = await post(client, ws, f"integration_call/{name}/{operation}", {})
    assert called.status_code == 200, called.text[:300]
    assert [r.outcome for r in await _records(db, ws.org.id)] == ["ok"]


SPEC_WITH_NUL_TITLE = json.dumps({"openapi": "3.0.3", "info": {"title": "Ware\u0000house", "version": "1"},
                                  "paths": {"/x": {"get": {"operationId": "getX", "responses": {"200": {
                                      "description": "ok"}}}}}})


async def test_importing_by_url_a_description_with_a_nul_in_its_title_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory, db: Database, receiver: Receiver) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "wh_" + uuid.uuid4().hex[:8]
    receiver.script("/spec.json", [Answer(status=200, body=SPEC_WITH_NUL_TITLE,
                                          headers={"content-type": "application/json"})])
    answer = await post(client, ws, "config_manage/integrations/integration/importOpenapi",
                        {"name": name, "url": receiver.url("/spec.json")})
    assert answer.status_code in (200, 400), answer.text[:300]
    if answer.status_code == 400:
        assert answer.json()["error"] == "invalid_openapi"
    else:
        async with db.read() as session:
            assert (await session.execute(select(IntegrationApp.id).where(IntegrationApp.name == name))).first()


async def test_importing_inline_a_description_with_a_nul_in_its_title_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    answer = await post(client, ws, "config_manage/integrations/integration/importOpenapi",
                        {"name": "wh_" + uuid.uuid4().hex[:8], "spec": SPEC_WITH_NUL_TITLE})
    assert answer.status_code in (200, 400), answer.text[:300]
