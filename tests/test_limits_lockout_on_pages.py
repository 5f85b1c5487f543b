"""The lockout on the pages that check a secret themselves (the login form, key registration, the OAuth token,
revocation and registration-management endpoints): guesses sent all at once pass the edge together, yet each is
counted before its secret is checked (prism.edge.lockout): exactly ten are answered as failures and every other
one 429, and a right secret checked after the address locked is refused 429 too. In memory and on Redis."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from starlette.applications import Starlette

from prism.config import Settings
from tests.factories import PASSWORD, Factory, Workspace
from tests.limits_support import client_for, limited_app
from tests.oauth_support import CLIENT_BODIES, OAUTH, field

GUESSES = 40
FAILURES = 10
# Ceilings out of the way: only the lockout may refuse.
UNLIMITED = {"rate_limit_auth_endpoints": 10**6, "rate_limit_key_registration": 10**6,
             "rate_limit_anonymous_discovery": 10**6}


@dataclass(frozen=True)
class Attempt:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]



@asynccontextmanager
async def _limited(settings: Settings, app: Any, limiter_storage: dict[str, Any]) -> AsyncIterator[Starlette]:
    async with limited_app(settings, app, **UNLIMITED, **limiter_storage) as limited:
        yield limited


async def _burst(client: httpx.AsyncClient, attempt: Callable[[bool], Attempt]) -> tuple[list[httpx.Response],
                                                                                     httpx.Response]:
    """The right secret passes the edge first, and its page checks it after GUESSES wrong secrets sent all at once
    were answered (its body is held back until then): the wrong answers, and the right one's."""
    reading, released = asyncio.Event(), asyncio.Event()
    right = attempt(True)

    async def held_body() -> AsyncIterator[bytes]:
        reading.set()  # the page reads the body: the edge has admitted this request
        await released.wait()
        yield right.body

    sent = asyncio.create_task(client.request(right.method, right.path, content=held_body(),
                                              headers={**right.headers, "Content-Length": str(len(right.body))}))
    await asyncio.wait_for(reading.wait(), 30)
    wrong = [attempt(False) for _ in range(GUESSES)]
    answers = await asyncio.gather(*(client.request(a.method, a.path, content=a.body, headers=a.headers)
                                     for a in wrong))
    released.set()
    return list(answers), await sent


def _exactly_ten_failures(wrong: list[httpx.Response], right: httpx.Response, failure: int) -> None:
    statuses = [answer.status_code for answer in wrong]
    assert statuses.count(failure) == FAILURES and statuses.count(429) == GUESSES - FAILURES, (
        statuses, [a.text[:300] for a in wrong if a.status_code not in (failure, 429)])
    locked = [answer for answer in wrong if answer.status_code == 429]
    assert all("too_many_failed_attempts" in answer.text and answer.headers["Retry-After"] for answer in locked)
    # Checked after the guesses locked the address: refused like them, though it was right.
    assert right.status_code == 429 and "too_many_failed_attempts" in right.text, right.text


async def test_login(settings: Settings, app: Any, factory: Factory, limiter_storage: dict[str, Any]) -> None:
    ws = await factory.workspace(roles=("member",))
    async with _limited(settings, app, limiter_storage) as limited, client_for(limited, _address()) as client:
        csrf = field((await client.get("/login/")).text, "csrf_token")

        def attempt(right: bool) -> Attempt:
            return _form("POST", "/login/", {"csrf_token": csrf, "email": ws.emails["member"], "next": "/",
                                             "password": PASSWORD if right else f"wrong {uuid.uuid4()}"})

        wrong, right = await _burst(client, attempt)
    _exactly_ten_failures(wrong, right, 401)
    assert right.headers["content-type"].startswith("text/html")  # a person reads it


async def test_key_registration(settings: Settings, app: Any, factory: Factory,
                                limiter_storage: dict[str, Any]) -> None:
    ws = await factory.workspace(roles=("member",))
    async with _limited(settings, app, limiter_storage) as limited, client_for(limited, _address()) as client:
        def attempt(right: bool) -> Attempt:
            return _json("POST", "/api/mcp/api-keys/register/", {
                "email": ws.emails["member"], "password": PASSWORD if right else f"wrong {uuid.uuid4()}",
                "name": "burst"}, ws.host)

        wrong, right = await _burst(client, attempt)
    _exactly_ten_failures(wrong, right, 401)


async def _confidential_client(client: httpx.AsyncClient, ws: Workspace) -> dict[str, Any]:
    answer = await client.post(f"{OAUTH}/register/", json={**CLIENT_BODIES["chatgpt"], "client_name": _name()},
                               headers={"Host": ws.host})
    assert answer.status_code == 201, answer.text
    registered: dict[str, Any] = answer.json()
    return registered


@pytest.mark.parametrize("endpoint", ["token", "revoke"])
async def test_oauth_client_secrets(settings: Settings, app: Any, factory: Factory, limiter_storage: dict[str, Any],
                                    endpoint: str) -> None:
    ws = await factory.workspace(roles=("member",))
    async with _limited(settings, app, limiter_storage) as limited, client_for(limited, _address()) as client:
        registered = await _confidential_client(client, ws)

        def attempt(right: bool) -> Attempt:
            secret = registered["client_secret"] if right else f"pcs_{uuid.uuid4().hex}"
            form = {"client_id": registered["client_id"], "client_secret": secret}
            if endpoint == "token":
                form.update(grant_type="refresh_token", refresh_token="prt_unknown")
            else:
                form.update(token="prt_unknown")
            return _form("POST", f"{OAUTH}/{endpoint}/", form, ws.host)

        wrong, right = await _burst(client, attempt)
    # invalid_client: 400 from the token endpoint when the secret came in the form (SPEC), 401 from revocation
    _exactly_ten_failures(wrong, right, 400 if endpoint == "token" else 401)
    assert all(a.json()["error"] in ("invalid_client", "too_many_failed_attempts") for a in wrong)


async def test_registration_management(settings: Settings, app: Any, factory: Factory,
                                       limiter_storage: dict[str, Any]) -> None:
    ws = await factory.workspace(roles=("member",))
    async with _limited(settings, app, limiter_storage) as limited, client_for(limited, _address()) as client:
        registered = await _confidential_client(client, ws)

        def attempt(right: bool) -> Attempt:  # a PUT: the token is checked once the body is read
            token = registered["registration_access_token"] if right else f"rat_{uuid.uuid4().hex}"
            body = {**CLIENT_BODIES["chatgpt"], "client_name": registered["client_name"],
                    "client_id": registered["client_id"]}
            return _json("PUT", f"{OAUTH}/register/{registered['client_id']}", body, ws.host,
                         Authorization=f"Bearer {token}")

        wrong, right = await _burst(client, attempt)
    _exactly_ten_failures(wrong, right, 401)


def _address() -> str:
    """A fresh /64 for each test: counters of earlier tests are not met."""
    return f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"


def _name() -> str:
    return f"Burst {uuid.uuid4().hex[:8]}"


def _form(method: str, path: str, form: dict[str, str], host: str = "localhost") -> Attempt:
    return Attempt(method, path, urlencode(form).encode(),
                   {"Host": host, "Content-Type": "application/x-www-form-urlencoded"})


def _json(method: str, path: str, body: dict[str, Any], host: str, **headers: str) -> Attempt:
    return Attempt(method, path, json.dumps(body).encode(),
                   {"Host": host, "Content-Type": "application/json", **headers})


async def test_requests_that_present_no_credential_are_not_guesses(settings: Settings, app: Any,
                                                                  factory: Factory) -> None:
    """Only a credential presented and wrong counts: one failure would lock here, and none of these does."""
    ws = await factory.workspace(roles=("member",))
    address = _address()
    async with limited_app(settings, app, **UNLIMITED, lockout_failures=1) as limited, \
            client_for(limited, address) as client:
        registered = await _confidential_client(client, ws)
        host = {"Host": ws.host}
        management = f"{OAUTH}/register/{registered['client_id']}"
        no_credential = [
            await client.post(f"{OAUTH}/token/", data={"grant_type": "refresh_token", "refresh_token": "prt_x"},
                              headers=host),
            await client.post(f"{OAUTH}/token/", headers=host, data={
                "grant_type": "refresh_token", "refresh_token": "prt_x", "client_id": registered["client_id"]}),
            await client.get(management, headers=host),
            await client.get(management, headers={**host, "Authorization": "Basic abc"}),
        ]
        assert [a.json()["error"] for a in no_credential] == ["invalid_client"] * 2 + ["invalid_token"] * 2
        assert await limited.state.rate_limiter.locked_out(address) is None
        # RFC 6750 section 3.1: no error code in the challenge of a request that sent no Bearer token.
        for answer in no_credential[2:]:
            assert answer.status_code == 401 and "error=" not in answer.headers["WWW-Authenticate"]
            assert answer.headers["WWW-Authenticate"].startswith("Bearer ")
        guessed = await client.get(management, headers={**host, "Authorization": "Bearer rat_wrong"})
        assert guessed.status_code == 401 and 'error="invalid_token"' in guessed.headers["WWW-Authenticate"]
        assert await limited.state.rate_limiter.locked_out(address) is not None  # a guess: counted


async def test_a_wrong_password_at_key_registration_gets_no_bearer_challenge(settings: Settings, app: Any,
                                                                             factory: Factory) -> None:
    """The endpoint takes an email and password: a Bearer challenge would send a client looking for a token."""
    ws = await factory.workspace(roles=("member",))
    async with limited_app(settings, app, **UNLIMITED) as limited, client_for(limited, _address()) as client:
        answer = await client.post("/api/mcp/api-keys/register/", headers={"Host": ws.host},
                                   json={"email": ws.emails["member"], "password": "wrong"})
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_credentials"
    assert "WWW-Authenticate" not in answer.headers
