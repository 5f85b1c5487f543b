"""Two `prism serve` processes on one database (PostgreSQL in its pass) asked the same OAuth question at the same
moment: refreshing one token (both answer the same rotated pair, and the grant lives on), exchanging one code (one
wins, and the replay revokes what it issued), registering one client_id (one client, both answer)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.factories import Factory
from tests.oauth_support import CLIENT_BODIES, OAUTH, bearer, browser, get_code, pkce, register, tokens_for
from tests.processes import TRACEBACK, Server, ServerPool, clean_env

TOKEN = f"{OAUTH}/token/"
REGISTER = f"{OAUTH}/register/"
ME = "/api/v1/dev/me/"
ROUNDS = 5


@pytest.fixture(scope="module")
def two_servers(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    log_dir = tmp_path_factory.mktemp("oauth-refresh-processes")
    pool = ServerPool(log_dir)
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_CREDENTIAL_CACHE_SECONDS="0",
                    PRISM_LOG_LEVEL="warning", PRISM_WEBHOOK_WORKER_IN_PROCESS="false")
    try:
        servers = [pool.start(env=env, ready=False) for _ in range(2)]
        for server in servers:
            server.wait_ready(timeout=120)
        yield servers
        assert not [s.stderr for s in servers if TRACEBACK in s.stderr]
    finally:
        pool.stop_all()


async def test_two_processes_refreshing_one_token_at_once_both_answer_the_same_pair(
        app: object, factory: Factory, two_servers: list[Server]) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        tokens = await tokens_for(c, ws)
    client_id = tokens["client"]["client_id"]
    # Addressed as the tenant's host (no port), both processes are the issuer that issued the tokens.
    headers = {"Host": ws.host}
    current: dict[str, Any] = tokens
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        for _ in range(ROUNDS):
            form = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": current["refresh_token"]}
            answers = await asyncio.gather(*(http.post(s.base_url + TOKEN, data=form) for s in two_servers))
            assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
            pairs = [(a.json()["access_token"], a.json()["refresh_token"]) for a in answers]
            assert pairs[0] == pairs[1]
            assert pairs[0][1] != current["refresh_token"]
            current = answers[0].json()
        me = [await http.get(s.base_url + ME, headers=bearer(current["access_token"])) for s in two_servers]
    assert [m.status_code for m in me] == [200, 200], [m.text for m in me]


async def test_one_code_exchanged_on_two_processes_at_once_wins_once_and_the_replay_revokes_the_grant(
        app: object, factory: Factory, two_servers: list[Server]) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c, httpx.AsyncClient(timeout=30, headers={"Host": ws.host}) as http:
        client = await register(c)
        for _ in range(ROUNDS):
            verifier, challenge = pkce()
            code = await get_code(c, client["client_id"], challenge, email=ws.emails["owner"])
            form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                    "client_id": client["client_id"], "redirect_uri": client["redirect_uris"][0]}
            answers = await asyncio.gather(*(http.post(s.base_url + TOKEN, data=form) for s in two_servers))
            assert sorted(a.status_code for a in answers) == [200, 400], [a.text for a in answers]
            [won] = [a.json() for a in answers if a.status_code == 200]
            [lost] = [a.json() for a in answers if a.status_code == 400]
            assert lost["error"] == "invalid_grant"
            # The replay, however close behind, revokes what the code issued (docs/oauth.md "Replay and reuse").
            me = await http.get(two_servers[0].base_url + ME, headers=bearer(won["access_token"]))
            assert me.status_code == 401, me.text
            refreshed = await http.post(two_servers[1].base_url + TOKEN, data={
                "grant_type": "refresh_token", "client_id": client["client_id"], "refresh_token": won["refresh_token"]})
            assert refreshed.status_code == 400, refreshed.text


async def test_one_client_id_registered_on_two_processes_at_once_is_one_client_both_answer(
        factory: Factory, two_servers: list[Server]) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with httpx.AsyncClient(timeout=30, headers={"Host": ws.host}) as http:
        for _ in range(ROUNDS):
            body = {**CLIENT_BODIES["claude"], "client_id": f"agent-{uuid.uuid4().hex[:12]}"}
            answers = await asyncio.gather(*(http.post(s.base_url + REGISTER, json=body) for s in two_servers))
            # As when sent one after the other: one creates the client, the other finds it.
            assert sorted(a.status_code for a in answers) == [200, 201], [a.text for a in answers]
            assert {a.json()["client_id"] for a in answers} == {body["client_id"]}
            other = {**body, "redirect_uris": ["https://elsewhere.example/callback"]}
            refused = await http.post(two_servers[1].base_url + REGISTER, json=other)
            assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata", refused.text
