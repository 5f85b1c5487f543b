"""The token and revocation endpoints read only a form (RFC 6749 4.1.3, RFC 7009 2.1): any other body is refused
400 invalid_request naming the content type required, not read as a form."""

from __future__ import annotations

import pytest

from tests.factories import Factory
from tests.oauth_support import OAUTH, browser, register

FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize("endpoint", ["token", "revoke"])
async def test_only_a_form_is_read(app: object, factory: Factory, endpoint: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        body = f"grant_type=refresh_token&client_id={client['client_id']}&refresh_token=prt_x&token=prt_x"
        path = f"{OAUTH}/{endpoint}/"
        refused = [
            await c.post(path, json={"grant_type": "refresh_token", "client_id": client["client_id"],
                                     "refresh_token": "prt_x", "token": "prt_x"}),
            await c.post(path, content=body.encode(), headers={"Content-Type": "text/plain"}),
            await c.post(path, content=body.encode(), headers={"Content-Type": "multipart/form-data; boundary=x"}),
            await c.post(path, content=body.encode()),  # no Content-Type at all
        ]
        for answer in refused:
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"] == "invalid_request"
            assert FORM in answer.json()["error_description"]
        # The media type without case, with parameters: a form.
        for content_type in ("Application/X-WWW-Form-Urlencoded", f"{FORM}; charset=utf-8"):
            read = await c.post(path, content=body.encode(), headers={"Content-Type": content_type})
            if endpoint == "token":
                assert read.status_code == 400 and read.json()["error"] == "invalid_grant", read.text
            else:
                assert read.status_code == 200, read.text
