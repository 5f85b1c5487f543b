"""The refresh_token grant: rotation, the grace window for concurrent refreshes, the absolute grant lifetime.

Time is moved by rewriting the rows' times in the test database (never by sleeping).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import select, text, update

from prism.config import Settings
from prism.identity.service import require_user, set_active
from prism.kit.timeutil import utcnow
from prism.oauth.models import OAuthGrant, OAuthRefreshToken
from prism.oauth.tokens import hash_secret
from prism.storage import Database
from prism.tables import metadata
from tests.factories import Factory
from tests.oauth_support import OAUTH, bearer, browser, get_code, pkce, register, tokens_for

TOKEN = f"{OAUTH}/token/"
ME = "/api/v1/dev/me/"


def _refresh_form(tokens: dict[str, Any], refresh_token: str | None = None,
                  client: dict[str, Any] | None = None) -> dict[str, str]:
    client = client or tokens["client"]
    form = {"grant_type": "refresh_token", "client_id": client["client_id"],
            "refresh_token": refresh_token or tokens["refresh_token"]}
    if "client_secret" in client:
        form["client_secret"] = client["client_secret"]
    return form


async def _refresh_row(db: Database, refresh_token: str) -> OAuthRefreshToken:
    async with db.read() as s:
        return (await s.execute(select(OAuthRefreshToken)
                                .where(OAuthRefreshToken.token_hash == hash_secret(refresh_token)))).scalar_one()


async def _rotated_long_ago(db: Database, settings: Settings, refresh_token: str) -> None:
    """Move the rotation of a spent refresh token to just past the grace window."""
    past = utcnow() - timedelta(seconds=settings.oauth_refresh_grace_seconds + 1)
    async with db.write() as s:
        await s.execute(update(OAuthRefreshToken).where(OAuthRefreshToken.token_hash == hash_secret(refresh_token))
                        .values(used_at=past))


async def _grant_consented_days_ago(db: Database, refresh_token: str, days: float) -> None:
    grant_id = (await _refresh_row(db, refresh_token)).grant_id
    async with db.write() as s:
        await s.execute(update(OAuthGrant).where(OAuthGrant.id == grant_id)
                        .values(created_at=utcnow() - timedelta(days=days)))


async def _works(c: httpx.AsyncClient, tokens: dict[str, Any]) -> bool:
    """The access token calls Prism and the refresh token refreshes."""
    me = await c.get(ME, headers=bearer(tokens["access_token"]))
    refreshed = await c.post(TOKEN, data=_refresh_form(tokens))
    return me.status_code == 200 and refreshed.status_code == 200


async def test_two_concurrent_refreshes_of_one_token_both_get_the_same_pair_and_the_grant_stays_alive(
        app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        first, second = await asyncio.gather(c.post(TOKEN, data=_refresh_form(tokens)),
                                             c.post(TOKEN, data=_refresh_form(tokens)))
        assert first.status_code == 200, first.text
        assert second.status_code == 200, second.text
        pair = {k: first.json()[k] for k in ("access_token", "refresh_token", "scope", "token_type")}
        assert {k: second.json()[k] for k in pair} == pair
        assert pair["refresh_token"] != tokens["refresh_token"]
        assert 3590 <= second.json()["expires_in"] <= 3600
        assert await _works(c, {**tokens, **pair})


async def test_a_refresh_token_reused_after_the_grace_window_revokes_the_family(
        app: object, factory: Factory, db: Database, settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        rotated = await c.post(TOKEN, data=_refresh_form(tokens))
        assert rotated.status_code == 200, rotated.text
        assert (await c.get(ME, headers=bearer(rotated.json()["access_token"]))).status_code == 200
        await _rotated_long_ago(db, settings, tokens["refresh_token"])
        reuse = await c.post(TOKEN, data=_refresh_form(tokens))
        newest = await c.post(TOKEN, data=_refresh_form(tokens, rotated.json()["refresh_token"]))
        access = await c.get(ME, headers=bearer(rotated.json()["access_token"]))
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    assert newest.status_code == 400 and newest.json()["error"] == "invalid_grant"
    assert access.status_code == 401


async def test_a_refresh_token_reused_by_another_client_within_the_window_revokes_the_family(
        app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        rotated = await c.post(TOKEN, data=_refresh_form(tokens))
        assert rotated.status_code == 200, rotated.text
        other = await register(c, {"client_name": "other", "redirect_uris": ["https://other.example/cb"],
                                   "grant_types": ["authorization_code", "refresh_token"]})
        stolen = await c.post(TOKEN, data=_refresh_form(tokens, client=other))
        newest = await c.post(TOKEN, data=_refresh_form(tokens, rotated.json()["refresh_token"]))
        access = await c.get(ME, headers=bearer(rotated.json()["access_token"]))
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"
    assert newest.status_code == 400 and newest.json()["error"] == "invalid_grant"
    assert access.status_code == 401


async def test_a_refresh_within_the_window_on_another_host_revokes_the_family(app: object,
                                                                               factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        rotated = await c.post(TOKEN, data=_refresh_form(tokens))
        assert rotated.status_code == 200, rotated.text
    async with browser(app, "localhost") as platform:
        elsewhere = await platform.post(TOKEN, data=_refresh_form(tokens))
    async with browser(app, ws.host) as c:
        access = await c.get(ME, headers=bearer(rotated.json()["access_token"]))
    assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_grant"
    assert access.status_code == 401


async def test_a_grant_older_than_its_absolute_lifetime_cannot_refresh_however_recently_rotated(
        app: object, factory: Factory, db: Database, settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    max_age = settings.oauth_grant_max_age_days
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        await _grant_consented_days_ago(db, tokens["refresh_token"], max_age - 1)
        young = await c.post(TOKEN, data=_refresh_form(tokens))
        assert young.status_code == 200, young.text
        # The refresh token just issued has its whole idle lifetime ahead; the grant's age still ends it.
        await _grant_consented_days_ago(db, young.json()["refresh_token"], max_age + 1)
        old = await c.post(TOKEN, data=_refresh_form(tokens, young.json()["refresh_token"]))
    assert old.status_code == 400, old.text
    assert old.json()["error"] == "invalid_grant" and "authorize again" in old.json()["error_description"]


async def test_a_refresh_token_idle_past_its_lifetime_cannot_refresh(app: object, factory: Factory,
                                                                     db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        async with db.write() as s:
            await s.execute(update(OAuthRefreshToken)
                            .where(OAuthRefreshToken.token_hash == hash_secret(tokens["refresh_token"]))
                            .values(expires_at=utcnow() - timedelta(seconds=1)))
        expired = await c.post(TOKEN, data=_refresh_form(tokens))
    assert expired.status_code == 400 and expired.json()["error"] == "invalid_grant"


async def test_the_database_holds_no_usable_token_after_concurrent_refreshes(app: object, factory: Factory,
                                                                            db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        answers = await asyncio.gather(*(c.post(TOKEN, data=_refresh_form(tokens)) for _ in range(3)))
    assert [a.status_code for a in answers] == [200] * 3, [a.text for a in answers]
    secrets = {tokens["access_token"], tokens["refresh_token"], answers[0].json()["access_token"],
               answers[0].json()["refresh_token"]}
    # The random part of a refresh token and the signature of an access token are what make them usable.
    secrets |= {s.split(".")[-1] for s in secrets} | {s.removeprefix("prt_") for s in secrets}
    # The pair is kept for the grace window, sealed.
    assert (await _refresh_row(db, tokens["refresh_token"])).successor_sealed
    found = []
    async with db.read() as s:
        for table in metadata.sorted_tables:
            for row in (await s.execute(text(f"SELECT * FROM {table.name}"))).all():  # noqa: S608 (our tables)
                found += [(table.name, v) for v in row if isinstance(v, str) and any(t in v for t in secrets)]
    assert found == []


async def test_a_sealed_pair_is_cleared_once_past_its_window(app: object, factory: Factory, db: Database,
                                                             settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        rotated = (await c.post(TOKEN, data=_refresh_form(tokens))).json()
        await _rotated_long_ago(db, settings, tokens["refresh_token"])
        again = await c.post(TOKEN, data=_refresh_form(tokens, rotated["refresh_token"]))
        assert again.status_code == 200, again.text
    assert (await _refresh_row(db, tokens["refresh_token"])).successor_sealed is None
    assert (await _refresh_row(db, rotated["refresh_token"])).successor_sealed is not None


async def test_a_deactivated_users_refresh_token_refreshes_nothing_until_they_are_activated(
        app: object, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        async with db.write() as s:
            user = await require_user(s, ws.emails["owner"])
            await set_active(s, user, False)
        refused = await c.post(TOKEN, data=_refresh_form(tokens))
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", refused.text
        assert "deactivated" in refused.json()["error_description"]
        async with db.write() as s:
            await set_active(s, await require_user(s, ws.emails["owner"]), True)
        # Refused, not spent: the same token refreshes once the user is back.
        assert (await c.post(TOKEN, data=_refresh_form(tokens))).status_code == 200


async def test_a_spent_refresh_token_presented_again_within_the_grace_window_refreshes_nothing_for_a_deactivated_user(
        app: object, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
        assert (await c.post(TOKEN, data=_refresh_form(tokens))).status_code == 200  # spent, its pair sealed
        async with db.write() as s:
            await set_active(s, await require_user(s, ws.emails["owner"]), False)
        again = await c.post(TOKEN, data=_refresh_form(tokens))  # within the window
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
        assert "deactivated" in again.json()["error_description"]


async def test_a_code_issued_before_its_user_was_deactivated_is_exchanged_for_nothing(
        app: object, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c)
        verifier, challenge = pkce()
        redirect_uri = client["redirect_uris"][0]
        code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"], redirect_uri=redirect_uri)
        async with db.write() as s:
            await set_active(s, await require_user(s, ws.emails["owner"]), False)
        refused = await c.post(TOKEN, data={"grant_type": "authorization_code", "code": code,
                                            "code_verifier": verifier, "client_id": client["client_id"],
                                            "redirect_uri": redirect_uri})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant", refused.text
    assert "deactivated" in refused.json()["error_description"]
