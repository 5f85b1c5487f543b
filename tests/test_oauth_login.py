"""The /login/ page: sign-in, CSRF, safe `next`, and failed sign-ins counting towards the address lockout."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from argon2 import PasswordHasher
from sqlalchemy import update

from prism.app import create_app
from prism.config import Settings
from prism.identity import passwords
from prism.identity.service import require_user, set_password
from prism.models import User
from prism.storage.database import Database
from tests.factories import PASSWORD, Factory, Workspace, password_hash
from tests.oauth_support import browser, field, sign_in


@pytest.fixture
async def guarded_app(settings: Settings) -> AsyncIterator[object]:
    """An app with the real lockout (10 failures in 60 s block the address), on the shared database."""
    application = create_app(settings.model_copy(update={"lockout_failures": 10}))
    async with application.router.lifespan_context(application):
        yield application


async def test_signing_in_redirects_to_a_relative_next_only(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        local = await sign_in(c, ws.emails["owner"], next_path="/api/mcp/oauth/authorize/?x=1")
    async with browser(app, ws.host) as c:
        foreign = await sign_in(c, ws.emails["owner"], next_path="//evil.example/")
    assert local.status_code == 303 and local.headers["location"] == "/api/mcp/oauth/authorize/?x=1"
    assert foreign.status_code == 303 and foreign.headers["location"] == "/"
    assert "httponly" in local.headers["set-cookie"].lower() and "samesite=lax" in local.headers["set-cookie"].lower()


async def test_a_login_post_without_the_pages_csrf_token_is_refused(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        answer = await c.post("/login/", data={"email": ws.emails["owner"], "password": "x", "csrf_token": "forged"})
    assert answer.status_code == 403 and "location" not in answer.headers


async def test_a_wrong_password_is_401_on_the_page(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(client._transport.app, ws.host) as c:  # type: ignore[attr-defined]
        answer = await sign_in(c, ws.emails["owner"], password="wrong password")
    assert answer.status_code == 401 and "Wrong email or password" in answer.text
    assert answer.headers["x-frame-options"] == "DENY"


async def test_ten_failed_sign_ins_lock_the_address_out(guarded_app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(guarded_app, ws.host) as c:
        page = await c.get("/login/")
        token = field(page.text, "csrf_token")
        for _ in range(10):
            failed = await c.post("/login/", data={"csrf_token": token, "email": ws.emails["owner"],
                                                   "password": "wrong password", "next": "/"})
            assert failed.status_code == 401
        right = await c.post("/login/", data={"csrf_token": token, "email": ws.emails["owner"],
                                              "password": PASSWORD, "next": "/"})
    assert right.status_code == 429
    assert "location" not in right.headers


async def test_an_oversized_login_form_is_413_and_a_streamed_one_is_read_whole(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        too_big = await c.post("/login/", content=b"x=" + b"y" * (1024 * 1024),
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert too_big.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the form arrives in pieces
            for piece in (b"email=nobody%40example.com", b"&password=x", b"&csrf_token=forged"):
                yield piece

        streamed = await c.post("/login/", content=chunks(),
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 403  # read whole: the forged CSRF token is what refuses it


async def _sign_out_elsewhere(app: object, ws: Workspace, db: Database) -> None:
    async with browser(app, ws.host) as other:
        assert (await sign_in(other, ws.emails["owner"], next_path="/console/")).status_code == 303
        token = field((await other.get("/console/keys/", params={"org": ws.org.id})).text, "csrf_token")
        assert (await other.post("/logout/", data={"csrf_token": token, "next": "/"})).status_code == 303


async def _deactivate(app: object, ws: Workspace, db: Database) -> None:
    async with db.write() as session:
        await session.execute(update(User).where(User.email == ws.emails["owner"]).values(is_active=False))


async def _change_password(app: object, ws: Workspace, db: Database) -> None:
    async with db.write() as session:
        await set_password(session, await require_user(session, ws.emails["owner"]), password_hash())


@pytest.mark.parametrize("end_session", [_sign_out_elsewhere, _deactivate, _change_password])
async def test_a_browser_whose_session_ended_elsewhere_reaches_the_login_form(
        app: object, factory: Factory, db: Database,
        end_session: Callable[[object, Workspace, Database], Awaitable[None]]) -> None:
    """The login page took any cookie naming a user for a signed-in person and sent it back to `next`, while the
    console, checking that the person's sessions had not ended, sent it to the login page: once the person
    signed out in another browser (or got a new password, or was deactivated), this browser went round
    /console/ → /login/ → /console/ until its cookie expired, 12 hours later, and never saw the form."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        stale_token = field((await c.get("/console/keys/", params={"org": ws.org.id})).text, "csrf_token")
        await end_session(app, ws, db)
        url, hops = "/console/", 0
        answer = await c.get(url)
        while answer.status_code == 303 and hops < 4:
            hops += 1
            answer = await c.get(answer.headers["location"])
        assert answer.status_code == 200 and hops <= 2, (hops, answer.status_code, answer.headers.get("location"))
        assert 'name="password"' in answer.text
        fresh_token = field(answer.text, "csrf_token")
        assert fresh_token != stale_token  # the stale session was replaced by an anonymous one, not kept
        if end_session is _deactivate:
            return
        again = await c.post("/login/", data={"csrf_token": fresh_token, "email": ws.emails["owner"],
                                              "password": PASSWORD, "next": "/console/"})
        assert again.status_code == 303 and again.headers["location"] == "/console/"
        assert (await c.get("/console/")).status_code == 303  # on to the organization's inbox, signed in


class _WatchedHasher(PasswordHasher):
    """The tests' fast hasher, whose check waits until the test lets it finish (or 5 s have passed)."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=1024, parallelism=1)
        self.started, self.released = threading.Event(), threading.Event()
        self.released_in_time: list[bool] = []

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        self.started.set()
        self.released_in_time.append(self.released.wait(timeout=5))
        return super().verify(hash, password)


async def _login_form(c: httpx.AsyncClient, ws: Workspace) -> httpx.Response:
    return await sign_in(c, ws.emails["owner"])


async def _key_registration(c: httpx.AsyncClient, ws: Workspace) -> httpx.Response:
    return await c.post("/api/mcp/api-keys/register/", json={"email": ws.emails["owner"], "password": PASSWORD})


@pytest.mark.parametrize("check", [_login_form, _key_registration])
async def test_other_requests_are_answered_while_a_password_is_checked(
        app: object, factory: Factory, monkeypatch: pytest.MonkeyPatch,
        check: Callable[[httpx.AsyncClient, Workspace], Awaitable[httpx.Response]]) -> None:
    """The login page checked the password (argon2, 50-350 ms of CPU with the production parameters) on the event
    loop: every other request of the process waited for it. The check waits here until /healthz has been
    answered; on the loop it could not be, and the check gives up waiting after 5 s."""
    ws = await factory.workspace(roles=("owner",))
    hasher = _WatchedHasher()
    monkeypatch.setattr(passwords, "_hasher", hasher)
    async with browser(app, ws.host) as c:
        checking = asyncio.ensure_future(check(c, ws))
        for _ in range(500):
            if hasher.started.is_set() or checking.done():
                break
            await asyncio.sleep(0.01)
        health = await c.get("/healthz")
        hasher.released.set()
        answer: Any = await checking
    assert health.status_code == 200
    assert answer.status_code in (201, 303), answer.text
    assert hasher.released_in_time == [True], "the password check held the event loop"
