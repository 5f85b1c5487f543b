"""Detaching a persona or AI system from an OAuth client: detaching what is not tied is a no-op that says so,
and a client no member of the organization ever authorized is not found there (it may be another tenant's)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from prism.governance.models import ClientGovernance
from prism.identity.service import add_to_organization
from prism.models import User
from prism.storage import Database
from prism.tenancy.service import create_organization
from tests.factories import Factory, Workspace, ledger_keys
from tests.governance_support import ok, post
from tests.oauth_support import CLIENT_BODIES, browser, register, tokens_for

ATTACH = {"persona": ("config_manage/governance/persona/attach", "persona_id"),
          "ai_system": ("config_manage/governance/ai_system/attach", "ai_system_id")}


async def _authorized_client(app: object, ws: Workspace) -> str:
    """A client registered for this test alone, authorized by the workspace owner (its tokens act in `ws`)."""
    async with browser(app, ws.host) as c:
        registered = await register(c, {**CLIENT_BODIES["cursor"], "client_name": f"Agent {uuid.uuid4().hex[:8]}"})
        tokens = await tokens_for(c, ws, client=registered)
    return str(tokens["client"]["client_id"])


async def _ties(db: Database, client_id: str) -> int:
    async with db.read() as session:
        return int((await session.execute(select(func.count()).select_from(ClientGovernance).where(
            ClientGovernance.client_id == client_id))).scalar_one())


@pytest.mark.parametrize("what", ["persona", "ai_system"])
async def test_detaching_from_an_oauth_client_with_no_tie_is_a_no_op_that_says_so(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database, what: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    client_id = await _authorized_client(app, ws)
    path, column = ATTACH[what]

    answer: dict[str, Any] = await ok(client, ws, path, {"client_id": client_id, column: None})

    assert answer["client_id"] == client_id and answer["changed"] is False
    assert answer["persona_id"] is None and answer["ai_system_id"] is None
    assert await _ties(db, client_id) == 0
    # Detaching twice after a real tie: the first one changes something, the second says it did not.
    made = await ok(client, ws, "config_manage/governance/ai_system/create",
                    {"name": f"system {uuid.uuid4().hex[:6]}", "risk_level": "limited"})
    await ok(client, ws, ATTACH["ai_system"][0], {"client_id": client_id, "ai_system_id": made["id"]})
    if what == "persona":  # the AI system stays tied: the row stays, and the persona was never set
        assert (await ok(client, ws, path, {"client_id": client_id, column: None}))["changed"] is False
        assert await _ties(db, client_id) == 1
        await ok(client, ws, ATTACH["ai_system"][0], {"client_id": client_id, "ai_system_id": None})
    else:
        assert (await ok(client, ws, path, {"client_id": client_id, column: None}))["changed"] is True
        assert (await ok(client, ws, path, {"client_id": client_id, column: None}))["changed"] is False
    assert await _ties(db, client_id) == 0


@pytest.mark.parametrize("what", ["persona", "ai_system"])
async def test_an_oauth_client_only_another_organization_authorized_is_not_found(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database, what: str) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    client_id = await _authorized_client(app, other)
    path, column = ATTACH[what]
    mine = await ok(client, ws, f"config_manage/governance/{what}/create",
                    {"name": f"n{uuid.uuid4().hex[:6]}", "default": "allow"} if what == "persona" else
                    {"name": f"n{uuid.uuid4().hex[:6]}", "risk_level": "high"})

    for value in (None, mine["id"]):
        refused = await post(client, ws, path, {"client_id": client_id, column: value})
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"] == "not_found"
    assert await _ties(db, client_id) == 0
    # The organization whose member authorized it may tie it (and detach it) as before.
    theirs = await ok(client, other, "config_manage/governance/ai_system/create",
                      {"name": "theirs", "risk_level": "minimal"})
    await ok(client, other, ATTACH["ai_system"][0], {"client_id": client_id, "ai_system_id": theirs["id"]})
    assert (await ok(client, other, ATTACH["ai_system"][0], {"client_id": client_id, "ai_system_id": None}))[
        "changed"] is True


async def test_a_client_may_be_tied_only_in_the_organizations_its_grants_consented_to(
        app: object, client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as session:
        second = await create_organization(session, ws.tenant, name="Second org", keys=ledger_keys())
        third = await create_organization(session, ws.tenant, name="Third org", keys=ledger_keys())
        owner = (await session.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await add_to_organization(session, owner, second, role="member")
        await add_to_organization(session, owner, third, role="member")
    async with browser(app, ws.host) as c:  # the owner consents for the workspace's organization and the second
        registered = await register(c, {**CLIENT_BODIES["cursor"], "client_name": f"Agent {uuid.uuid4().hex[:8]}"})
        tokens = await tokens_for(c, ws, client=registered, organizations=[ws.org.id, second.id])
    client_id = str(tokens["client"]["client_id"])
    await factory.add_key(ws, "second_admin", role="owner", org=second)
    await factory.add_key(ws, "third_admin", role="owner", org=third)
    made = await ok(client, ws, "config_manage/governance/ai_system/create",
                    {"name": "in the second org", "risk_level": "high"}, label="second_admin")
    tied = await ok(client, ws, ATTACH["ai_system"][0], {"client_id": client_id, "ai_system_id": made["id"]},
                    label="second_admin")
    assert tied["ai_system_id"] == made["id"] and tied["changed"] is True
    # The third organization is the owner's too, but no grant names it: the client's tokens cannot act there.
    refused = await post(client, ws, ATTACH["ai_system"][0], {"client_id": client_id, "ai_system_id": None},
                         label="third_admin")
    assert refused.status_code == 404 and refused.json()["error"] == "not_found", refused.text
