"""A failure of Prism's own while it answers an MCP request (a bug in a handler) is that request's JSON-RPC error,
-32603 internal_error; the other requests of its batch, which may have written, still get their answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from sqlalchemy import func, select
from starlette.applications import Starlette

from prism.config import Settings
from prism.models import AuditEntry
from prism.registry import HandlerApp, HandlerCall
from tests.apps_support import running_app_with
from tests.factories import Factory
from tests.test_mcp_protocol import call, headers_for, initialize, rpc

broken = HandlerApp("broken", description="A handler with a bug, and one that works.")
WRITES: list[str] = []


class Named(BaseModel):
    name: str


@broken.handler("entity_crud", "thing", "crash", params=Named, scope="write", permission=None,
                description="Fails with an error that is not Prism's refusal.")
async def crash(call: HandlerCall, p: Named) -> dict[str, Any]:
    raise RuntimeError("a bug in a handler")


@broken.handler("entity_crud", "thing", "note", params=Named, scope="write", permission=None,
                description="Notes the name and answers it.")
async def note(call: HandlerCall, p: Named) -> dict[str, Any]:
    WRITES.append(p.name)
    return {"noted": p.name}


@pytest.fixture(scope="module")
async def broken_app(settings: Settings) -> AsyncIterator[Starlette]:
    async with running_app_with(settings, broken) as application:
        yield application


def tool_call(operation: str, name: str, request_id: int) -> dict[str, Any]:
    return rpc("tools/call", {"name": "prism_entity_crud", "arguments": {
        "app": "broken", "entity": "thing", "operation": operation, "arguments": {"name": name}}},
        request_id=request_id)


async def test_a_handler_bug_is_that_requests_json_rpc_error_and_the_rest_of_the_batch_is_answered(
        broken_app: Starlette, factory: Factory, caplog: pytest.LogCaptureFixture) -> None:
    ws = await factory.workspace()
    headers = headers_for(ws)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=broken_app),
                                 base_url=f"http://{ws.host}") as client:
        session = await initialize(client, headers)
        alone = await call(client, headers, session, tool_call("crash", "a", 7))
        assert alone.status_code == 200, alone.text
        assert alone.json() == {"jsonrpc": "2.0", "id": 7, "error": {
            "code": -32603, "message": "internal server error", "data": {"error": "internal_error"}}}
        batch = await call(client, headers, session, [tool_call("note", "first", 1), tool_call("crash", "b", 2),
                                                      tool_call("note", "third", 3)])
    assert batch.status_code == 200, batch.text
    answers = {a["id"]: a for a in batch.json()}
    assert answers[2]["error"]["data"] == {"error": "internal_error"}
    assert answers[1]["result"]["isError"] is False and answers[3]["result"]["isError"] is False
    assert WRITES == ["first", "third"]
    assert "a bug in a handler" in caplog.text  # the traceback is logged for the operator, not sent
    assert "a bug in a handler" not in batch.text + alone.text
    async with broken_app.state.db.read() as s:
        refused = await s.scalar(select(func.count()).select_from(AuditEntry).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.coordinate == "entity_crud/broken/thing/crash",
            AuditEntry.error_code == "internal_error"))
    assert refused == 2  # audited like any refused call
