"""Tokens as an attacker sends them: a JWT header whose `typ` is not text is an invalid token (401; 200 at
revocation), never a 500; a spent refresh token replayed by another client revokes the family whatever that
client is registered for; a live one is unknown to it; a missing grant_type is an invalid request."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from tests.factories import Factory
from tests.oauth_support import OAUTH, bearer, browser, register, tokens_for

TOKEN = f"{OAUTH}/token/"
ME = "/api/v1/dev/me/"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forged(header: dict[str, Any]) -> str:
    return ".".join([_b64(orjson.dumps(header)), _b64(b'{"sub":"x"}'), _b64(b"sig")])


async def test_jwt_header_with_non_string_typ_is_401_on_a_door_not_500(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        answer = await c.get(ME, headers=bearer(_forged({"alg": "RS256", "typ": None, "kid": "x"})))
    assert answer.status_code == 401, answer.text


async def test_jwt_header_with_non_string_typ_is_401_at_userinfo_not_500(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        answer = await c.get(f"{OAUTH}/userinfo/", headers=bearer(_forged({"alg": "RS256", "typ": 1})))
    assert answer.status_code == 401, answer.text


async def test_jwt_header_with_non_string_typ_is_200_at_revoke_not_500(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        answer = await c.post(f"{OAUTH}/revoke/", data={"token": _forged({"alg": "RS256", "typ": ["at+jwt"]})})
    assert answer.status_code == 200, answer.text


async def test_missing_grant_type_is_invalid_request(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        answer = await c.post(TOKEN, data={"client_id": client["client_id"], "code": "pac_x"})
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_request", answer.text


async def test_spent_refresh_token_from_another_client_without_refresh_grant_revokes_family(
        app: object, factory: Factory) -> None:
    """docs/oauth.md "Replay and reuse": a spent refresh token presented again from another client revokes the
    grant. A client registered without the refresh_token grant gets `unauthorized_client` and nothing is revoked."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        client = tokens["client"]
        rotated = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": client["client_id"],
                                            "refresh_token": tokens["refresh_token"]})
        assert rotated.status_code == 200, rotated.text
        other = await register(c, {"client_name": "other", "redirect_uris": ["https://other.example/cb"]})
        stolen = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": other["client_id"],
                                           "refresh_token": tokens["refresh_token"]})
        access = await c.get(ME, headers=bearer(rotated.json()["access_token"]))
        newest = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": client["client_id"],
                                           "refresh_token": rotated.json()["refresh_token"]})
    assert access.status_code == 401, "the family must be revoked: a spent token in another client's hands"
    assert newest.status_code == 400 and newest.json()["error"] == "invalid_grant", newest.text
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant", stolen.text


async def test_unspent_refresh_token_from_another_client_is_invalid_grant(app: object, factory: Factory) -> None:
    """docs/oauth.md: "An unspent refresh token presented by another client is invalid_grant and revokes nothing."
    A client without the refresh_token grant instead learns the token is live (`unauthorized_client`)."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        other = await register(c, {"client_name": "other2", "redirect_uris": ["https://other2.example/cb"]})
        stolen = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": other["client_id"],
                                           "refresh_token": tokens["refresh_token"]})
        bogus = await c.post(TOKEN, data={"grant_type": "refresh_token", "client_id": other["client_id"],
                                          "refresh_token": "prt_not-a-real-token"})
    assert bogus.json()["error"] == "invalid_grant", bogus.text
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant", stolen.text
