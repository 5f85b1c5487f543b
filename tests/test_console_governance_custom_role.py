"""The console's governance page for a tenant's own role that may plan missions (`missions.*`) but not read
personas or AI systems: the page is shown with the mission form, and the sections the role may not list say so
(the page was a 403 as a whole, its form unreachable and a mission created by hand landing on a 403)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import Factory
from tests.oauth_support import browser, field, sign_in

pytestmark = pytest.mark.engine_independent


async def test_a_role_that_may_plan_missions_reaches_the_mission_form(app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    await factory.give_role(ws, "member", "planner", ["missions.*"])
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["member"], next_path="/console/")).status_code == 303
        shown = await c.get("/console/governance/", params=org)
        assert shown.status_code == 200 and 'id="mission-form"' in shown.text, shown.text
        assert "may not list personas" in shown.text and "may not list AI systems" in shown.text
        assert 'id="persona-form"' not in shown.text
        made = await c.post("/console/governance/mission/", params=org, data={
            "csrf_token": field(shown.text, "csrf_token"), "name": "Quarter close", "budget_ceiling": "10"})
        assert made.status_code == 303, made.text
        after = await c.get(made.headers["location"])
    assert after.status_code == 200 and "Quarter close" in after.text
