"""Shared steps of the governance tests: calling handlers through a door, reading events and the ledger."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import select

from prism.auth.context import AuthContext
from prism.auth.person import memberships, person_context
from prism.keys.service import lookup_of
from prism.models import AuditEntry, OutboxEvent, User
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.ledger_support import seal_waiting

SPEC_DECISION_FIELDS = {"decision_id", "decision", "decision_type", "primary_reason", "ai_system",
                        "policies_evaluated", "policies_violated", "latency_ms", "trace_id"}


async def post(client: httpx.AsyncClient, ws: Workspace, path: str, arguments: Any, *, label: str = "owner",
               headers: dict[str, str] | None = None, envelope: dict[str, Any] | None = None) -> httpx.Response:
    """POST /api/mcp/tools/prism_<mega>/ with the envelope for the coordinate `mega/app/entity/operation`."""
    mega, app, entity, operation = path.split("/")
    body = {"app": app, "entity": entity, "operation": operation, "arguments": arguments, **(envelope or {})}
    return await client.post(f"/api/mcp/tools/prism_{mega}/", json=body,
                             headers={**ws.headers(label), **(headers or {})})


async def ok(client: httpx.AsyncClient, ws: Workspace, path: str, arguments: Any, *, label: str = "owner",
             headers: dict[str, str] | None = None) -> Any:
    response = await post(client, ws, path, arguments, label=label, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def governed_key(factory: Factory, client: httpx.AsyncClient, ws: Workspace, label: str, *,
                       persona: dict[str, Any] | None = None, risk_level: str | None = None,
                       role: str = "owner") -> dict[str, Any]:
    """A new key `label` with a persona made from `persona` and/or an AI system of `risk_level`."""
    await factory.add_key(ws, label, role=role)
    key_ref = lookup_of(ws.keys[label])
    made: dict[str, Any] = {}
    if persona is not None:
        made["persona"] = await ok(client, ws, "config_manage/governance/persona/create", persona)
        await ok(client, ws, "config_manage/governance/persona/attach",
                 {"key": key_ref, "persona_id": made["persona"]["id"]})
    if risk_level is not None:
        made["ai_system"] = await ok(client, ws, "config_manage/governance/ai_system/create",
                                     {"name": f"agent {label}", "risk_level": risk_level})
        await ok(client, ws, "config_manage/governance/ai_system/attach",
                 {"key": key_ref, "ai_system_id": made["ai_system"]["id"]})
    return made


async def events(db: Database, organization_id: str, event_type: str) -> list[dict[str, Any]]:
    async with db.read() as session:
        rows = (await session.execute(select(OutboxEvent.payload).where(
            OutboxEvent.organization_id == organization_id, OutboxEvent.event_type == event_type)
            .order_by(OutboxEvent.created_at))).scalars()
        return [json.loads(r) for r in rows]


async def entries(db: Database, organization_id: str) -> list[AuditEntry]:
    await seal_waiting(db, organization_id)
    async with db.read() as session:
        return list((await session.execute(select(AuditEntry).where(
            AuditEntry.organization_id == organization_id).order_by(AuditEntry.seq))).scalars())


async def owner_context(db: Database, ws: Workspace) -> AuthContext:
    """The workspace owner's caller context as a signed-in person, for calling a service directly."""
    async with db.read() as s:
        user = (await s.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        membership = (await s.execute(memberships(user))).first()
    assert membership is not None
    return person_context(user, membership, credential_kind="console", credential_id="console:test", key_name="c",
                          signed_in_at=user.created_at)
