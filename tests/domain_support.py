"""Helpers for the business-domain tests: call a handler through the canonical door, read the outbox."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import select

from prism.models import OutboxEvent
from prism.storage import Database
from tests.factories import Workspace


class Caller:
    """One key of one workspace, calling handlers by coordinate through POST /api/mcp/tools/<tool>/."""

    def __init__(self, client: httpx.AsyncClient, ws: Workspace, label: str = "owner") -> None:
        self.client, self.ws, self.label = client, ws, label

    async def raw(self, mega_tool: str, app: str, entity: str, operation: str,
                  arguments: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        r = await self.client.post(f"/api/mcp/tools/prism_{mega_tool}/", headers=self.ws.headers(self.label), json={
            "app": app, "entity": entity, "operation": operation, "arguments": arguments or {}})
        body: dict[str, Any] = r.json()
        return r.status_code, body

    async def ok(self, mega_tool: str, app: str, entity: str, operation: str,
                 arguments: dict[str, Any] | None = None) -> Any:
        status, body = await self.raw(mega_tool, app, entity, operation, arguments)
        assert status == 200 and body["success"], (mega_tool, app, entity, operation, status, body)
        return body["data"]

    async def refused(self, status: int, code: str, mega_tool: str, app: str, entity: str, operation: str,
                      arguments: dict[str, Any] | None = None) -> str:
        got, body = await self.raw(mega_tool, app, entity, operation, arguments)
        assert (got, body.get("error")) == (status, code), (mega_tool, app, entity, operation, got, body)
        assert body["success"] is False and body["message"]
        return str(body["message"])

    # entity_crud shortcuts
    async def create(self, app: str, entity: str, arguments: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = await self.ok("entity_crud", app, entity, "create", arguments)
        return data

    async def read(self, app: str, entity: str, record_id: str) -> dict[str, Any]:
        data: dict[str, Any] = await self.ok("entity_crud", app, entity, "read", {"id": record_id})
        return data


async def events(db: Database, organization_id: str, event_type: str) -> list[dict[str, Any]]:
    """The envelopes of one type in an organization's outbox, oldest first."""
    async with db.read() as session:
        rows = (await session.execute(select(OutboxEvent).where(
            OutboxEvent.organization_id == organization_id, OutboxEvent.event_type == event_type)
            .order_by(OutboxEvent.created_at, OutboxEvent.id))).scalars().all()
    return [json.loads(r.payload) for r in rows]
