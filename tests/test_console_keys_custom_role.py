"""The console's key page for a role that may mint keys but not list them (`keys.add_key` without
`keys.view_key`, a tenant's own role): the key it mints is still shown, once, with its plaintext."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from prism.models import Membership, Organization, Role, User
from prism.storage import Database
from tests.factories import Factory
from tests.oauth_support import browser, field, sign_in

pytestmark = pytest.mark.engine_independent


async def test_a_role_that_mints_without_listing_still_sees_what_it_minted(
        app: Any, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    other = await factory.workspace(roles=("owner",))  # the same role name in another tenant is another role
    async with db.write() as s:
        for workspace in (ws, other):
            s.add(Role(tenant_id=workspace.tenant.id, name="minter", permissions=["keys.add_key"]))
        await s.flush()
        role = (await s.execute(select(Role).where(Role.tenant_id == ws.tenant.id,
                                                   Role.name == "minter"))).scalar_one()
        user = (await s.execute(select(User).where(User.email == ws.emails["member"]))).scalar_one()
        organization = await s.get(Organization, ws.org.id)
        assert organization is not None
        membership = (await s.execute(select(Membership).where(
            Membership.user_id == user.id, Membership.organization_id == organization.id))).scalar_one()
        membership.role_id = role.id
    async with browser(app, ws.host) as c:
        signed = await sign_in(c, ws.emails["member"], next_path="/console/keys/")
        assert signed.status_code == 303, signed.text
        shown = await c.get("/console/keys/", params={"org": ws.org.id})
        assert shown.status_code == 200, shown.text
        minted = await c.post("/console/keys/", params={"org": ws.org.id},
                              data={"csrf_token": field(shown.text, "csrf_token"), "name": "minted-here",
                                    "mcp:read": "on"})
    assert minted.status_code == 201, minted.text
    assert 'id="new-key-value">ck_' in minted.text  # the plaintext, shown once
