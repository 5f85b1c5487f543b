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
from contextvars import ContextVar
from typing import Any

import httpx
import pytest
import uvicorn

import prism.auth.authenticator
import prism.edge.lockout
import prism.identity.passwords
import prism.keys.service
from prism.auth.authenticator import Authenticator
from prism.config import Settings
from prism.ratelimit import RateLimiter
from prism.ratelimit.verdict import Busy, Locked, Verdict
from tests.factories import PASSWORD, Factory
from tests.limits_support import limited_app
from tests.oauth_support import bearer, browser, field, tokens_for
from tests.processes import free_port

WRONG = 30
RIGHT_AT = 20  # the right secret is sent after twenty wrong ones
FAILURES = 10
UNLIMITED = {"rate_limit_auth_endpoints": 10**6, "rate_limit_key_registration": 10**6,
             "rate_limit_anonymous": 10**6, "trusted_proxies": "127.0.0.1"}


def _fresh_address() -> str:
    """A /64 of its own: no counters of another test, or of the other engine's pass running at once."""
    return f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"



@asynccontextmanager
async def _served(settings: Settings, app: Any, limiter_storage: dict[str, Any], **more: Any) -> AsyncIterator[str]:
    """The app with fresh counters, served by uvicorn on a free port: its base URL."""
    async with _served_app(settings, app, limiter_storage, **more) as (base_url, _limited):
        yield base_url


@asynccontextmanager
async def _served_app(settings: Settings, app: Any, limiter_storage: dict[str, Any],
                      **more: Any) -> AsyncIterator[tuple[str, Any]]:
    """As `_served`, with the served app (its limiter) too."""
    async with limited_app(settings, app, **UNLIMITED, **limiter_storage, **more) as limited:
        port = free_port()
        # The app's lifespan ran already (limited_app); X-Forwarded-For is the edge's to read (trusted_proxies).
        server = uvicorn.Server(uvicorn.Config(limited, host="127.0.0.1", port=port, lifespan="off",
                                               proxy_headers=False, log_level="warning"))
        task = asyncio.create_task(server.serve())
        try:
            while not server.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
                await asyncio.sleep(0.01)
            yield f"http://127.0.0.1:{port}", limited
        finally:
            server.should_exit = True
            await task


class Checks:
    """Counts the checks of a secret by wrapping the function that performs them (which still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str, right: Callable[..., bool]) -> None:
        self.right = self.wrong = 0
        self.known: list[object] = []  # what the limiter answered a cached key (`hit_known_secret`)
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
    address = _fresh_address()
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
                                                          limiter_storage: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("member",))
    checks = Checks(monkeypatch, prism.identity.passwords, "_check", lambda _hash, password: password == PASSWORD)
    async with _served(settings, app, limiter_storage) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as reader:
            page = await reader.get("/login/")
            csrf, cookies = field(page.text, "csrf_token"), dict(page.cookies)

        def send(client: httpx.AsyncClient, right: bool) -> Any:
            return client.post("/login/", data={"csrf_token": csrf, "email": ws.emails["member"], "next": "/",
                                                "password": PASSWORD if right else f"wrong {uuid.uuid4()}"})

        wrong, right = await _burst(base_url, send, cookies)
    _at_most_ten_checked(checks, wrong, right, 303)


@pytest.mark.parametrize("cached", [False, True], ids=["key-not-cached", "key-cached"])
async def test_an_api_key_burst_checks_at_most_ten_keys(settings: Settings, app: Any, factory: Factory,
                                                        limiter_storage: dict[str, Any], cached: bool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Guesses at a known key's secret (its prefix is no secret): each is checked against the key's hash.

    Cached: the right key is in the authenticator's cache before the burst (one request warmed it), so it is
    counted without a reservation of its own (prism.edge.stack), yet only while the failures plus the attempts in
    flight leave a place, as a reservation would: it is refused once ten guesses failed, and waits while they are
    in flight. The cache's own look at a guess (`Authenticator.peek`) answers nothing, so it is no check here; a
    right key it accepted is checked when the limiter counted it."""
    ws = await factory.workspace()
    key = ws.headers()["Authorization"].removeprefix("Bearer ")
    checks = Checks(monkeypatch, prism.auth.authenticator, "keys_match", lambda _hash, plaintext: plaintext == key)
    _count_known_keys_as_checked(monkeypatch, checks)
    more = {"credential_cache_seconds": 60} if cached else {}
    async with _served(settings, app, limiter_storage, **more) as base_url:
        if cached:
            async with httpx.AsyncClient(base_url=base_url, headers={"X-Forwarded-For": _fresh_address()}) as warm:
                assert (await warm.get("/api/v1/dev/me/", headers=ws.headers())).status_code == 200
            checks.right, checks.known = 0, []

        def send(client: httpx.AsyncClient, right: bool) -> Any:
            guess = key if right else key[:-8] + uuid.uuid4().hex[:8]
            return client.get("/api/v1/dev/me/", headers={"Host": ws.host, "Authorization": f"Bearer {guess}"})

        wrong, right = await _burst(base_url, send)
    _at_most_ten_checked(checks, wrong, right, 200)
    assert len(checks.known) == (1 if cached else 0), checks.known  # the right key took the cached way


_peeking: ContextVar[bool] = ContextVar("peeking", default=False)


def _count_known_keys_as_checked(monkeypatch: pytest.MonkeyPatch, checks: Checks) -> None:
    """Hash comparisons made by `Authenticator.peek` are not counted as checks (a guess goes on to a reservation
    and its check); a key it accepted counts as checked when the limiter counted it (`hit_known_secret` neither
    Busy nor Locked), as a right key whose reservation was granted."""
    peek, counted = Authenticator.peek, prism.auth.authenticator.keys_match

    def peek_uncounted(self: Authenticator, *args: Any) -> Any:
        token = _peeking.set(True)
        try:
            return peek(self, *args)
        finally:
            _peeking.reset(token)

    def keys_match(*args: Any) -> bool:
        return bool(prism.keys.service.keys_match(*args) if _peeking.get() else counted(*args))

    known = RateLimiter.hit_known_secret

    async def hit_known_secret(self: RateLimiter, *args: Any) -> Any:
        outcome = await known(self, *args)
        checks.known.append(outcome)
        if isinstance(outcome, Verdict):
            checks.right += 1
        return outcome

    monkeypatch.setattr(Authenticator, "peek", peek_uncounted)
    monkeypatch.setattr(prism.auth.authenticator, "keys_match", keys_match)
    monkeypatch.setattr(RateLimiter, "hit_known_secret", hit_known_secret)


@pytest.mark.parametrize("cached", [False, True], ids=["key-not-cached", "key-cached"])
async def test_right_keys_sent_all_at_once_are_all_served(settings: Settings, app: Any, factory: Factory,
                                                          limiter_storage: dict[str, Any], cached: bool) -> None:
    """An attempt frees its place once its key is accepted: a client's many requests in flight from one address
    wait for a place at most briefly, and none is refused. A cached key reserves none."""
    ws = await factory.workspace()
    more = {"credential_cache_seconds": 60} if cached else {}
    async with _served(settings, app, limiter_storage, **more) as base_url, httpx.AsyncClient(
            base_url=base_url, headers={**ws.headers(), "X-Forwarded-For": _fresh_address()}, timeout=60,
            limits=httpx.Limits(max_connections=64)) as client:
        answers = await asyncio.gather(*(client.get("/api/v1/dev/me/") for _ in range(64)))
    assert [a.status_code for a in answers] == [200] * 64, [a.text for a in answers if a.status_code != 200]


@asynccontextmanager
async def _cached_key(settings: Settings, app: Any, factory: Factory, limiter_storage: dict[str, Any]
                      ) -> AsyncIterator[tuple[httpx.AsyncClient, RateLimiter, str, list[Any]]]:
    """A served app whose authenticator caches the right key already: a client from a fresh address sending it,
    the app's limiter, that address, and what the limiter answered the cached key (`hit_known_secret`)."""
    ws = await factory.workspace()
    address = _fresh_address()
    known: list[Any] = []
    async with _served_app(settings, app, limiter_storage, credential_cache_seconds=60) as (base_url, limited):
        limiter: RateLimiter = limited.state.rate_limiter
        hit_known_secret = limiter.hit_known_secret

        async def spied(*args: Any) -> Any:
            outcome = await hit_known_secret(*args)
            known.append(outcome)
            return outcome

        limiter.hit_known_secret = spied  # type: ignore[method-assign]
        async with httpx.AsyncClient(base_url=base_url, headers={**ws.headers(), "X-Forwarded-For": address},
                                     timeout=60) as client:
            assert (await client.get("/api/v1/dev/me/")).status_code == 200  # loads the key into the cache
            yield client, limiter, address, known


async def test_a_cached_key_waits_for_a_place_while_ten_attempts_are_in_flight(
        settings: Settings, app: Any, factory: Factory, limiter_storage: dict[str, Any]) -> None:
    async with _cached_key(settings, app, factory, limiter_storage) as (client, limiter, address, known):
        for i in range(FAILURES):
            assert await limiter.reserve_attempt(address, f"guess {i}") is True
        answer = asyncio.create_task(client.get("/api/v1/dev/me/"))
        await asyncio.sleep(0.5)
        assert not answer.done()  # no place: the key waits, it is not served
        assert await limiter.release_attempt(address, "guess 0") is None  # one check ends: a place comes free
        assert (await answer).status_code == 200
    assert len(known) == 1 and isinstance(known[0], Busy), known  # the warm-up loaded the key: no cached way


async def test_a_cached_key_is_refused_when_no_place_comes_free(settings: Settings, app: Any, factory: Factory,
                                                                limiter_storage: dict[str, Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prism.edge.lockout, "SLOT_WAIT_SECONDS", 0.3)
    async with _cached_key(settings, app, factory, limiter_storage) as (client, limiter, address, known):
        for i in range(FAILURES):
            assert await limiter.reserve_attempt(address, f"guess {i}") is True
        refused = await client.get("/api/v1/dev/me/")
    assert refused.status_code == 429 and refused.json()["error"] == "too_many_attempts_in_progress", refused.text
    assert refused.headers["Retry-After"] == "1"
    assert isinstance(known[-1], Busy), known


async def test_a_cached_key_arriving_while_the_tenth_guess_is_checked_is_refused_once_it_failed(
        settings: Settings, app: Any, factory: Factory, limiter_storage: dict[str, Any]) -> None:
    """Nine guesses failed and the tenth is being checked when the right key arrives: it may not be served before
    the tenth is settled, and once that one failed the address is locked, the right key refused like a guess."""
    async with _cached_key(settings, app, factory, limiter_storage) as (client, limiter, address, known):
        for _ in range(FAILURES - 1):
            assert await limiter.auth_failed(address) is False
        assert await limiter.reserve_attempt(address, "tenth") is True
        answer = asyncio.create_task(client.get("/api/v1/dev/me/"))
        await asyncio.sleep(0.3)
        assert not answer.done()
        assert await limiter.auth_failed(address, "tenth") is True  # locked now
        refused = await answer
        assert refused.status_code == 429 and refused.json()["error"] == "too_many_failed_attempts", refused.text
        # And it is refused at once, in the same step, when it arrives after the tenth failure.
        again = await client.get("/api/v1/dev/me/")
        assert again.status_code == 429 and again.json()["error"] == "too_many_failed_attempts"
    assert len(known) == 2 and isinstance(known[0], Busy) and isinstance(known[1], Locked), known


async def test_access_tokens_take_no_place_among_the_attempts_in_flight(
        settings: Settings, app: Any, factory: Factory, limiter_storage: dict[str, Any]) -> None:
    """A hosted connector's users share its egress address. Their access tokens are signatures no guess produces,
    so they are counted after their check and never wait for the ten places: with all ten taken by API-key guesses
    being checked, twenty token requests are served at once, at the edge and at the userinfo endpoint (which
    checks the token itself). A locked address still refuses them."""
    ws = await factory.workspace()
    address = _fresh_address()
    async with _served_app(settings, app, limiter_storage) as (base_url, limited):
        limiter: RateLimiter = limited.state.rate_limiter
        async with browser(limited, ws.host) as page:
            token = (await tokens_for(page, ws))["access_token"]
        async with httpx.AsyncClient(base_url=base_url, headers={**bearer(token), "Host": ws.host,
                                                                 "X-Forwarded-For": address}, timeout=60) as client:
            for i in range(FAILURES):
                assert await limiter.reserve_attempt(address, f"guess {i}") is True
            for path in ("/api/v1/dev/me/", "/api/mcp/oauth/userinfo/"):
                served = await asyncio.wait_for(asyncio.gather(*(client.get(path) for _ in range(20))), 3)
                assert [answer.status_code for answer in served] == [200] * 20, (path, served[0].text)
            for i in range(FAILURES):  # the guesses being checked all fail: the tenth locks the address
                await limiter.auth_failed(address, f"guess {i}")
            refused = [await client.get(path) for path in ("/api/v1/dev/me/", "/api/mcp/oauth/userinfo/")]
    assert [r.status_code for r in refused] == [429, 429], refused[1].text
    assert [r.json()["error"] for r in refused] == ["too_many_failed_attempts"] * 2
