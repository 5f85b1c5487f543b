"""A fair lockout: credentials Prism issued that expired or were revoked are refused without counting as
guesses; guesses still count; a throttled MCP client is still told where to sign in."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx
import jwt
from sqlalchemy import update

from prism.config import Settings
from prism.keys.service import lookup_of
from prism.kit.timeutil import utcnow
from prism.models import ApiKey
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.limits_support import client_for, limited_app
from tests.oauth_support import OAUTH, bearer, browser, tokens_for

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
LIST = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
MCP = "/api/mcp/sse"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}


async def _set_key(db: Database, plaintext: str, **values: Any) -> None:
    async with db.write() as session:
        await session.execute(update(ApiKey).where(ApiKey.lookup == lookup_of(plaintext)).values(**values))


def _doors(client: httpx.AsyncClient, ws: Workspace, headers: dict[str, str]) -> list[Any]:
    """The same credential on the canonical door, the sandbox and the MCP door."""
    return [client.post(CANONICAL, headers={**headers, "Host": ws.host}, json=LIST),
            client.get("/api/v1/dev/me/", headers={**headers, "Host": ws.host}),
            client.post(MCP, headers={**headers, **MCP_HEADERS, "Host": ws.host}, json=INITIALIZE)]


def _invalid_token_in_each_shape(answers: list[httpx.Response]) -> None:
    envelope, plain, rpc = (a.json() for a in answers)
    assert [a.status_code for a in answers] == [401, 401, 401], [a.text for a in answers]
    assert envelope["success"] is False and envelope["error"] == "invalid_token"
    assert plain["error"] == "invalid_token"
    assert rpc["error"]["data"]["error"] == "invalid_token"


async def test_revoked_and_expired_api_keys_are_401_without_counting_toward_the_lockout(
        settings: Settings, app: Any, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    revoked = await factory.add_key(ws, "revoked")
    expired = await factory.add_key(ws, "expired", expires_days=1)
    inactive_member = await factory.add_key(ws, "leaving")
    await _set_key(db, revoked, revoked_at=utcnow())
    await _set_key(db, expired, expires_at=utcnow() - timedelta(seconds=5))
    async with limited_app(settings, app, lockout_failures=2) as limited, client_for(limited) as client:
        for key in (revoked, expired) * 3:
            _invalid_token_in_each_shape([await request for request in _doors(client, ws, bearer(key))])
        assert (await client.get("/api/v1/dev/me/", headers=ws.headers())).status_code == 200
        # A guess at a revoked key's secret (its lookup prefix right, the rest wrong) is a guess: it counts.
        guess = revoked[:-4] + ("AAAA" if not revoked.endswith("AAAA") else "BBBB")
        assert (await client.get("/api/v1/dev/me/", headers={**bearer(guess), "Host": ws.host})).status_code == 401
        wrong = inactive_member[:-1] + ("Z" if not inactive_member.endswith("Z") else "Y")  # never the key itself
        assert (await client.get("/api/v1/dev/me/", headers={**bearer(wrong), "Host": ws.host})).status_code == 401
        locked = await client.get("/api/v1/dev/me/", headers=ws.headers())
        assert locked.status_code == 429 and locked.json()["error"] == "too_many_failed_attempts"
        # Locked out, every credential gets the same answer: the revoked key learns nothing either.
        same = await client.get("/api/v1/dev/me/", headers={**bearer(revoked), "Host": ws.host})
        assert same.status_code == 429 and same.json()["error"] == "too_many_failed_attempts"


async def test_expired_and_revoked_access_tokens_are_401_without_counting_toward_the_lockout(
        settings: Settings, app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with limited_app(settings, app, lockout_failures=2) as limited, client_for(limited) as client:
        async with browser(limited, ws.host) as page:
            issued = await tokens_for(page, ws)
            kept = await tokens_for(page, ws)
        claims = jwt.decode(issued["access_token"], options={"verify_signature": False})
        kid, key = await limited.state.authenticator.tokens.ring.signer()
        expired = jwt.encode({**claims, "iat": int(time.time()) - 4000, "exp": int(time.time()) - 120}, key,
                             algorithm="RS256", headers={"kid": kid, "typ": "at+jwt"})
        revoked = issued["access_token"]
        answer = await client.post(f"{OAUTH}/revoke/", headers={"Host": ws.host}, data={
            "token": issued["refresh_token"], "client_id": issued["client"]["client_id"]})
        assert answer.status_code == 200
        for token in (expired, revoked) * 3:
            _invalid_token_in_each_shape([await request for request in _doors(client, ws, bearer(token))])
            userinfo = await client.get(f"{OAUTH}/userinfo/", headers={**bearer(token), "Host": ws.host})
            assert userinfo.status_code == 401 and userinfo.json()["error"] == "invalid_token"
        assert (await client.get("/api/v1/dev/me/", headers={**bearer(kept["access_token"]),
                                                             "Host": ws.host})).status_code == 200
        # A token Prism never signed is a guess.
        forged = revoked[:-6] + ("AAAAAA" if not revoked.endswith("AAAAAA") else "BBBBBB")
        for _ in range(2):
            assert (await client.get("/api/v1/dev/me/", headers={**bearer(forged), "Host": ws.host})).status_code \
                == 401
        locked = await client.get("/api/v1/dev/me/", headers={**bearer(kept["access_token"]), "Host": ws.host})
        assert locked.status_code == 429 and locked.json()["error"] == "too_many_failed_attempts"


async def test_anonymous_mcp_requests_have_their_own_window_and_a_429_still_points_at_the_metadata(
        settings: Settings, app: Any) -> None:
    async with limited_app(settings, app, rate_limit_anonymous=2, rate_limit_anonymous_discovery=40) as limited, \
            client_for(limited) as client:
        # Far past the general anonymous ceiling: a connector's users starting OAuth from one egress address.
        for _ in range(40):
            first_step = await client.post(MCP, headers=MCP_HEADERS, json=INITIALIZE)
            assert first_step.status_code == 401
        refused = await client.post(MCP, headers=MCP_HEADERS, json=INITIALIZE)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and \
            'resource_metadata="http://localhost/.well-known/oauth-protected-resource/api/mcp/sse"' in challenge
        assert (await client.get("/api/v1/dev/ping/")).status_code == 200
