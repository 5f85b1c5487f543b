"""docs/oauth.md: a code is used once: "an exchange refused so spends its code, as any refused exchange does". The
refusal rolled back the exchange's transaction, and the claim of the code with it: after a wrong verifier or a
resource not granted, the same code still bought tokens."""

from __future__ import annotations

import pytest

from tests.factories import Factory
from tests.oauth_support import CLAUDE_REDIRECT, OAUTH, browser, get_code, pkce, register

TOKEN = f"{OAUTH}/token/"


@pytest.mark.parametrize(("refused_by", "error"), [
    ({"code_verifier": "wrong"}, "invalid_grant"),
    ({"code_verifier": "w" * 43}, "invalid_grant"),
    ({"resource": "https://elsewhere.example/"}, "invalid_target"),
    ({"redirect_uri": "http://127.0.0.1:9/other"}, "invalid_grant"),
])
async def test_a_refused_exchange_spends_its_code(app: object, factory: Factory, refused_by: dict[str, str],
                                                  error: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        verifier, challenge = pkce()
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"])
        form = {"grant_type": "authorization_code", "code": code, "client_id": client["client_id"],
                "redirect_uri": CLAUDE_REDIRECT, "code_verifier": verifier}
        refused = await c.post(TOKEN, data={**form, **refused_by})
        assert refused.status_code == 400 and refused.json()["error"] == error, refused.text
        again = await c.post(TOKEN, data=form)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
    assert "already used" in again.json()["error_description"]
