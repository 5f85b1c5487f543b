"""PRISM_RATE_LIMIT_ON_REDIS_FAILURE with the limiter's Redis at a closed port: `closed` refuses requests
carrying a secret with 503 rate_limit_unavailable (the same answer whatever the secret), `open` lets every
request pass uncounted; requests without a secret pass either way; a WARNING says so, once."""

from __future__ import annotations

from typing import Any

import pytest

from prism.config import Settings
from tests.factories import Factory
from tests.limits_support import client_for, limited_app
from tests.oauth_support import bearer, browser, tokens_for
from tests.processes import free_port

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
LIST = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}


def _closed_port() -> str:
    return f"redis://:not-logged@127.0.0.1:{free_port()}/0"


async def test_failing_closed_refuses_every_credentialed_request_the_same_way(
        settings: Settings, app: Any, factory: Factory, caplog: pytest.LogCaptureFixture) -> None:
    ws = await factory.workspace(roles=("owner",))
    bad = {"Authorization": "Bearer ck_" + "w" * 40, "Host": ws.host}
    with caplog.at_level("WARNING", logger="prism.ratelimit"):
        async with limited_app(settings, app, redis_url=_closed_port()) as limited, client_for(limited) as client:
            good_answer = await client.post(CANONICAL, headers=ws.headers(), json=LIST)
            bad_answer = await client.post(CANONICAL, headers=bad, json=LIST)
            for answer in (good_answer, bad_answer):
                assert answer.status_code == 503, answer.text
                assert answer.json() == {"success": False, "error": "rate_limit_unavailable",
                                         "message": answer.json()["message"], "tool_name": "prism_entity_crud"}
                assert answer.headers["retry-after"] == "5"
            assert good_answer.json() == bad_answer.json()
            me = await client.get("/api/v1/dev/me/", headers=ws.headers())
            assert me.status_code == 503 and me.json()["error"] == "rate_limit_unavailable"
            # Password and client-secret endpoints are refused before any secret is checked.
            login = await client.post("/api/mcp/api-keys/register/", json={"email": "a@b.c", "password": "x"})
            assert login.status_code == 503 and login.json()["error"] == "rate_limit_unavailable"
            token = await client.post("/api/mcp/oauth/token/", data={"grant_type": "client_credentials"})
            assert token.status_code == 503 and token.json()["error"] == "rate_limit_unavailable"
            # Nothing secret, nothing to guess: these pass uncounted.
            assert (await client.get("/api/v1/dev/ping/")).status_code == 200
            anonymous = await client.get("/api/v1/dev/me/", headers={"Host": ws.host})
            assert anonymous.status_code == 401 and anonymous.json()["error"] == "authentication_required"
    warnings = [r for r in caplog.records if r.name == "prism.ratelimit" and r.levelname == "WARNING"]
    assert len(warnings) == 1 and "Redis is unreachable" in warnings[0].getMessage()
    assert "not-logged" not in caplog.text


async def test_failing_open_lets_every_request_through_uncounted(
        settings: Settings, app: Any, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    bad = {"Authorization": "Bearer ck_" + "w" * 40, "Host": ws.host}
    async with limited_app(settings, app, redis_url=_closed_port(), rate_limit_on_redis_failure="open",
                           rate_limit_authenticated=2, lockout_failures=2) as limited, client_for(limited) as client:
        assert [(await client.get("/api/v1/dev/me/", headers=ws.headers())).status_code for _ in range(4)] == [200] * 4
        assert [(await client.get("/api/v1/dev/me/", headers=bad)).status_code for _ in range(4)] == [401] * 4
        wrong = await client.post("/api/mcp/api-keys/register/", json={"email": "nobody@example.com", "password": "x"})
        assert wrong.status_code == 401
        # Uncounted is not unchecked: the host and the MCP door's Origin are still refused.
        foreign = await client.post("/api/mcp/sse", headers={**ws.headers(), "Origin": "https://evil.example.com"},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert foreign.status_code == 403
        assert (await client.get("/api/v1/dev/me/", headers={"Host": "nosuchtenant-redis.localhost"})
                ).status_code == 404
        # The userinfo endpoint checks its access token itself: a right one is answered, a wrong one refused.
        async with browser(limited, ws.host) as page:
            token = (await tokens_for(page, ws))["access_token"]
        userinfo = [(await client.get("/api/mcp/oauth/userinfo/", headers={**bearer(value), "Host": ws.host}))
                    for value in (token, token[:-4] + "AAAA")]
        assert [answer.status_code for answer in userinfo] == [200, 401], userinfo[0].text


def test_the_setting_accepts_only_open_or_closed() -> None:
    assert Settings(database_url="sqlite:///unused.db").rate_limit_on_redis_failure == "closed"
    with pytest.raises(ValueError, match="rate_limit_on_redis_failure"):
        Settings(database_url="sqlite:///unused.db", rate_limit_on_redis_failure="sometimes")  # type: ignore[arg-type]
