"""The oversight inbox with more pending requests than it shows: its heading counts them all, it shows the most
urgent (priority, then SLA deadline, across all of them, not within the 100 due soonest), and the decided history
is the newest decisions, however many requests are pending (docs/governance.md "Oversight inbox")."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import select

from prism.governance.models import OversightRequest
from prism.kit.timeutil import utcnow
from prism.models import User
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok
from tests.oauth_support import browser, sign_in


def _request(ws: Workspace, user_id: str, status: str, created: datetime, *, priority: str = "normal",
             deadline_hours: float = 4) -> OversightRequest:
    return OversightRequest(
        id="ovr_" + secrets.token_hex(8), organization_id=ws.org.id, tenant_id=ws.tenant.id, persona_id=None,
        credential_id="cred", requested_by=user_id, coordinate="entity_crud/itsm/ticket/update",
        arguments_digest="0" * 64, status=status, priority=priority, reason="r",
        sla_deadline=created + timedelta(hours=deadline_hours), created_at=created,
        decided_by=user_id if status != "pending" else None,
        decided_at=created if status != "pending" else None, decision_note="the note" if status != "pending" else "")


async def test_the_inbox_counts_every_pending_request_shows_the_most_urgent_and_keeps_its_history(
        app: Any, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    now = utcnow()
    async with db.write() as s:
        member = (await s.execute(select(User).where(User.email == ws.emails["member"]))).scalar_one()
        s.add(_request(ws, member.id, "approved", now - timedelta(hours=2)))
        for n in range(105):
            s.add(_request(ws, member.id, "pending", now - timedelta(minutes=100 - n)))
        critical = _request(ws, member.id, "pending", now, priority="critical", deadline_hours=48)  # due last
        s.add(critical)
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        page = (await c.get("/console/oversight/", params={"org": ws.org.id})).text
    assert 'id="pending-count">106<' in page and 'id="pending-shown"' in page
    shown = re.findall(r'data-request="(ovr_[0-9a-f]+)"', page)
    assert shown and shown[0] == critical.id, shown[:3]
    assert "No request decided yet." not in page and "the note" in page
    decided = await ok(client, ws, "governance_review/governance/oversight_request/list", {"decided": True})
    waiting = await ok(client, ws, "governance_review/governance/oversight_request/list",
                       {"decided": False, "ordering": "urgency", "page_size": 1})
    assert decided["total"] == 1 and waiting["total"] == 106 and waiting["items"][0]["id"] == critical.id
