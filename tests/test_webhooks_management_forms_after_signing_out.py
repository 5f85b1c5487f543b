"""A form of the key dashboard or the webhook admin page posted after the session ended: the login page brings the
person back to the page the form was on (its action answers only POST, so coming back to it would be a 405)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import Factory
from tests.oauth_support import browser, query_of, sign_in


@pytest.mark.parametrize(("action", "page"), [
    ("/keys/any-key/revoke/", "/keys/"),
    ("/keys/", "/keys/"),
    ("/admin/integrations/webhooks/whk_x/test/", "/admin/integrations/webhooks/"),
    ("/admin/integrations/webhooks/whk_x/deliveries/d/resend/", "/admin/integrations/webhooks/"),
])
async def test_a_form_posted_signed_out_leads_back_to_its_page(app: Any, factory: Factory, action: str,
                                                              page: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        posted = await c.post(action, data={"csrf_token": "stale"})
        assert posted.status_code == 303 and posted.headers["location"].startswith("/login/"), posted.text
        next_path = query_of(posted.headers["location"])["next"]
        assert next_path == page
        signed = await sign_in(c, ws.emails["owner"], next_path=next_path)
        assert signed.status_code == 303, signed.text
        landed = await c.get(signed.headers["location"])
    assert landed.status_code == 200, (next_path, landed.status_code, landed.text[:200])
    assert landed.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("page", ["/keys/", "/admin/integrations/webhooks/"])
async def test_a_page_opened_signed_out_comes_back_to_itself_with_its_query(app: Any, factory: Factory,
                                                                             page: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        opened = await c.get(page, params={"done": "test"})
    assert opened.status_code == 303 and query_of(opened.headers["location"])["next"] == f"{page}?done=test"
