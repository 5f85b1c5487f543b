"""Every secret is counted before it is checked: a burst of guesses sent all at once, a right secret among them,
has at most ten secrets checked and exactly ten answered as failures, the right one honoured only if it got one of
those places. Before, every guess of the burst was checked, and a right one whose check ended before the tenth
failure was counted signed in, though sent after twenty wrong ones. A real server (uvicorn, on a port), memory and
Redis counters."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import redis
import uvicorn

import prism.auth.authenticator
import prism.identity.passwords
from prism.config import Settings
from tests.factories import PASSWORD, Factory
from tests.limits_support import limited_app
from tests.oauth_support import field
from tests.processes import free_port
from tests.test_limits_limiter import redis_available

REDIS_URL = "redis://127.0.0.1:6379/12"  # this module's own database: flushed before each test
WRONG = 30
RIGHT_AT = 20  # the right secret is sent after twenty wrong ones
FAILURES = 10
UNLIMITED = {"rate_limit_auth_endpoints": 10**6, "rate_limit_key_registration": 10**6,
             "rate_limit_anonymous": 10**6, "trusted_proxies": "127.0.0.1"}


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "memory":
        return {}
    if not redis_available():
        pytest.skip("no Redis on 127.0.0.1:6379")
    with redis.Redis.from_url(REDIS_URL) as own:
        own.flushdb()
    return {"redis_url": REDIS_URL}


@asynccontextmanager
async def _served(settings: Settings, app: Any, backend: dict[str, Any]) -> AsyncIterator[str]:
    """The app with fresh counters, served by uvicorn on a free port: its base URL."""
    async with limited_app(settings, app, **UNLIMITED, **backend) as limited:
        port = free_port()
        # The app's lifespan ran already (limited_app); X-Forwarded-For is the edge's to read (trusted_proxies).
        server = uvicorn.Server(uvicorn.Config(limited, host="127.0.0.1", port=port, lifespan="off",
                                               proxy_headers=False, log_level="warning"))
        task = asyncio.create_task(server.serve())
        try:
            while not server.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
                await asyncio.sleep(0.01)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            await task


class Checks:
    """Counts the checks of a secret by wrapping the function that performs them (which still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str, right: Callable[..., bool]) -> None:
        self.right = self.wrong = 0
        checked = getattr(owner, name)

        def counted(*args: Any) -> Any:
            if right(*args):
                self.right += 1
            else:
                self.wrong += 1
            return checked(*args)

        monkeypatch.setattr(owner, name, counted)


async def _burst(base_url: str, send: Callable[[httpx.AsyncClient, bool], Any],
                 cookies: dict[str, str] | None = None) -> tuple[list[int], int]:
    """WRONG wrong secrets and one right one, all at once, from one fresh address: the wrong answers' statuses and
    the right one's."""
    address = f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"
    async with httpx.AsyncClient(base_url=base_url, headers={"X-Forwarded-For": address}, cookies=cookies,
                                 timeout=60, limits=httpx.Limits(max_connections=WRONG + 1)) as client:
        answers = await asyncio.gather(*(send(client, i == RIGHT_AT) for i in range(WRONG + 1)))
    statuses = [answer.status_code for answer in answers]
    assert all(s in (200, 201, 302, 303, 401, 429) for s in statuses), [a.text for a in answers]
    assert all("too_many_failed_attempts" in a.text for a in answers if a.status_code == 429)
    right = statuses.pop(RIGHT_AT)
    return statuses, right


def _at_most_ten_checked(checks: Checks, wrong: list[int], right: int, success: int) -> None:
    assert checks.wrong <= FAILURES, f"{checks.wrong} wrong secrets were checked"
    assert wrong.count(401) == FAILURES and wrong.count(429) == WRONG - FAILURES, wrong
    # The right secret was checked, and honoured, only if it got one of the ten places.
    assert (right == success) == (checks.right == 1), (right, checks.right)
    assert right in (success, 429)


async def test_a_login_burst_checks_at_most_ten_passwords(settings: Settings, app: Any, factory: Factory,
                                                          backend: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("member",))
    checks = Checks(monkeypatch, prism.identity.passwords, "_check", lambda _hash, password: password == PASSWORD)
    async with _served(settings, app, backend) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as reader:
            page = await reader.get("/login/")
            csrf, cookies = field(page.text, "csrf_token"), dict(page.cookies)

        def send(client: httpx.AsyncClient, right: bool) -> Any:
            return client.post("/login/", data={"csrf_token": csrf, "email": ws.emails["member"], "next": "/",
                                                "password": PASSWORD if right else f"wrong {uuid.uuid4()}"})

        wrong, right = await _burst(base_url, send, cookies)
    _at_most_ten_checked(checks, wrong, right, 303)


async def test_an_api_key_burst_checks_at_most_ten_keys(settings: Settings, app: Any, factory: Factory,
                                                        backend: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guesses at a known key's secret (its prefix is no secret): each is checked against the key's hash."""
    ws = await factory.workspace()
    key = ws.headers()["Authorization"].removeprefix("Bearer ")
    checks = Checks(monkeypatch, prism.auth.authenticator, "keys_match", lambda _hash, plaintext: plaintext == key)
    async with _served(settings, app, backend) as base_url:

        def send(client: httpx.AsyncClient, right: bool) -> Any:
            guess = key if right else key[:-8] + uuid.uuid4().hex[:8]
            return client.get("/api/v1/dev/me/", headers={"Host": ws.host, "Authorization": f"Bearer {guess}"})

        wrong, right = await _burst(base_url, send)
    _at_most_ten_checked(checks, wrong, right, 200)


async def test_right_keys_sent_all_at_once_are_all_served(settings: Settings, app: Any, factory: Factory,
                                                          backend: dict[str, Any]) -> None:
    """An attempt frees its place once its key is accepted: a client's many requests in flight from one address
    wait for a place at most briefly, and none is refused."""
    ws = await factory.workspace()
    async with _served(settings, app, backend) as base_url, httpx.AsyncClient(
            base_url=base_url, headers={**ws.headers(), "X-Forwarded-For": "198.51.100.77"}, timeout=60,
            limits=httpx.Limits(max_connections=64)) as client:
        answers = await asyncio.gather(*(client.get("/api/v1/dev/me/") for _ in range(64)))
    assert [a.status_code for a in answers] == [200] * 64, [a.text for a in answers if a.status_code != 200]
