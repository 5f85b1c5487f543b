"""A requested client id or a PKCE challenge with a final newline is refused, as any other character outside their
alphabets is (Python's `$` matched before it)."""

from __future__ import annotations

from tests.factories import Factory
from tests.oauth_support import OAUTH, authorize_params, browser, error_code, pkce, register, sign_in


async def test_requested_client_id_with_trailing_newline_is_refused(app: object, factory: Factory) -> None:
    async with browser(app, "localhost") as c:
        answer = await c.post(f"{OAUTH}/register/", json={
            "client_id": "newline-client\n", "client_name": "nl", "redirect_uris": ["https://nl.example/cb"]})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_client_metadata"


async def test_code_challenge_with_trailing_newline_is_refused(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        await sign_in(c, ws.emails["owner"])
        _, challenge = pkce()
        answer = await c.get(f"{OAUTH}/authorize/", params=authorize_params(client["client_id"], challenge + "\n"))
    # Prism's error page, no consent page and no redirect (docs/oauth.md, Authorize errors).
    assert answer.status_code == 400 and "location" not in answer.headers, answer.headers.get("location")
    assert error_code(answer.text) == "invalid_request"
