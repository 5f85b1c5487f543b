"""The /login/ page: sign-in, CSRF, safe `next`, and failed sign-ins counting towards the address lockout."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from tests.factories import PASSWORD, Factory
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
