"""A persona's deny speaks before the arguments do: a denied caller gets 403 blocked whatever it sends (a 400 would
name the parameters of a tool it may not use), and the decision recorded is BLOCK."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from prism.governance.models import GovernanceDecision
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import governed_key, post

NO_VENDORS = {"name": "no-vendor-create", "default": "allow", "deny": ["entity_crud/finance/vendor/create"]}


async def test_a_denied_coordinate_is_blocked_whatever_the_arguments(client: httpx.AsyncClient, factory: Factory,
                                                                     db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona=NO_VENDORS, risk_level="high")
    response = await post(client, ws, "entity_crud/finance/vendor/create", {"probe": 1}, label="agent")
    async with db.read() as session:
        decisions = (await session.execute(select(GovernanceDecision.decision).where(
            GovernanceDecision.organization_id == ws.org.id))).scalars().all()
    assert (response.status_code, response.json()["error"], decisions) == (403, "blocked", ["BLOCK"]), (
        response.text, decisions)
