"""/console/ leads to the first section the person's role in the organization may use, and the navigation shows
only those: a tenant's own role without the oversight inbox's permission lands on a page it may read, not on a
403. The seeded roles still land on the inbox."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from prism.identity.service import add_to_organization
from prism.models import Organization, User
from prism.storage import Database
from tests.factories import Factory
from tests.oauth_support import browser, query_of, sign_in

AUDITOR = ["ledger.view_entry", "ledger.export_entry", "keys.view_key", "keys.add_key", "keys.change_key"]
NAV = re.compile(r'<nav aria-label="Console">(.*?)</nav>', re.S)


def navigation(page: str) -> list[str]:
    """The section paths the page's navigation links to."""
    found = NAV.search(page)
    assert found, page
    return re.findall(r'href="(/console/[a-z]+/)\?', found.group(1))


async def _also_owner_of(db: Database, email: str, organization: Organization) -> None:
    async with db.write() as s:
        user = (await s.execute(select(User).where(User.email == email))).scalar_one()
        await add_to_organization(s, user, organization, role="owner")


async def test_a_role_without_the_inbox_lands_on_the_first_section_it_may_use(
        app: Any, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.give_role(ws, "member", "auditor", AUDITOR)
    second = await factory.second_org(ws)
    await _also_owner_of(db, ws.emails["member"], second)
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        landing = await c.get("/console/", params={"org": ws.org.id})
        assert landing.status_code == 303
        assert landing.headers["location"].startswith("/console/ledger/?")
        assert query_of(landing.headers["location"])["org"] == ws.org.id  # in the organization asked for
        ledger = await c.get(landing.headers["location"])
        # In the other organization of the same tenant the same person is an owner: the inbox, as before.
        elsewhere = await c.get("/console/", params={"org": second.id})
        inbox = await c.get(elsewhere.headers["location"])
    assert ledger.status_code == 200, ledger.text[-600:]
    assert navigation(ledger.text) == ["/console/ledger/", "/console/keys/"]
    assert elsewhere.status_code == 303 and elsewhere.headers["location"].startswith("/console/oversight/?")
    assert query_of(elsewhere.headers["location"])["org"] == second.id
    assert inbox.status_code == 200
    assert navigation(inbox.text) == ["/console/oversight/", "/console/ledger/", "/console/governance/",
                                      "/console/keys/", "/console/webhooks/", "/console/members/"]


async def test_the_seeded_roles_and_another_tenant_still_land_on_the_inbox(app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member", "viewer"))
    await factory.give_role(ws, "member", "auditor", AUDITOR)  # this tenant's role: nothing to do with the other
    other = await factory.workspace(roles=("owner", "member", "viewer"))
    for role in ("owner", "member", "viewer"):
        async with browser(app, other.host) as c:
            assert (await sign_in(c, other.emails[role], next_path="/console/")).status_code == 303
            landing = await c.get("/console/")
            assert landing.status_code == 303 and landing.headers["location"].startswith("/console/oversight/?")
            inbox = await c.get(landing.headers["location"])
            assert inbox.status_code == 200, (role, inbox.status_code)
            assert navigation(inbox.text)[0] == "/console/oversight/"


async def test_a_section_the_role_may_only_create_in_stays_in_the_navigation(
        app: Any, factory: Factory) -> None:
    """A role that mints keys without listing them still reaches the key page (it shows the new key once)."""
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.give_role(ws, "member", "key-maker", ["keys.add_key"])
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        landing = await c.get("/console/", params={"org": ws.org.id})
        assert landing.headers["location"].startswith("/console/keys/?")
        keys = await c.get(landing.headers["location"])
    assert keys.status_code == 200
    assert navigation(keys.text) == ["/console/keys/"]


async def test_a_role_that_may_use_no_section_is_told_so(app: Any, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.give_role(ws, "member", "vendor-reader", ["finance.view_vendor"])
    second = await factory.second_org(ws, name="Other org")
    await _also_owner_of(db, ws.emails["member"], second)
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        home = await c.get("/console/", params={"org": ws.org.id})
        inbox = await c.get("/console/oversight/", params={"org": ws.org.id})
    assert home.status_code == 200, home.status_code
    assert 'id="no-section"' in home.text and "vendor-reader" in home.text
    assert navigation(home.text) == []
    # The organization switch and sign-out are there: in the other organization this person is an owner.
    assert f'value="{second.id}"' in home.text and 'id="sign-out"' in home.text
    assert inbox.status_code == 403


async def test_a_role_that_may_list_only_roles_gets_the_members_page(app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.give_role(ws, "member", "role-reader", ["organization.view_role"])
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        landing = await c.get("/console/", params={"org": ws.org.id})
        assert landing.headers["location"].startswith("/console/members/?")
        members = await c.get(landing.headers["location"])
    assert members.status_code == 200, members.text[-600:]
    assert "may not list members" in members.text and ws.emails["owner"] not in members.text
    assert "<dt>role-reader</dt>" in members.text  # this tenant's roles
    assert navigation(members.text) == ["/console/members/"]
