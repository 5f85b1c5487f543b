"""Page hardening: HSTS and the __Host- session cookie under https, `form-action 'self'` on every page, and the
OAuth consent page's form-action allowing its client's origin, whose answer is a 303 to the client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from prism.web.browser import form_action_source
from tests.factories import Factory
from tests.oauth_support import (
    CLIENT_BODIES,
    OAUTH,
    authorize_params,
    browser,
    consent,
    pkce,
    register,
    sign_in,
)

YEAR = 31536000


@pytest.fixture(scope="module")
async def https_app(settings: Settings) -> AsyncIterator[object]:
    application = create_app(settings.model_copy(update={"public_scheme": "https"}))
    async with application.router.lifespan_context(application):
        yield application


@asynccontextmanager
async def https_browser(app: object, host: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
                                 base_url=f"https://{host}") as c:
        yield c


async def test_under_https_pages_send_hsts_and_the_session_cookie_is_host_prefixed(
        https_app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with https_browser(https_app, ws.host) as c:
        page = await c.get("/login/")
        assert page.headers["strict-transport-security"] == f"max-age={YEAR}"  # this host only: no includeSubDomains
        assert "form-action 'self'" in page.headers["content-security-policy"]
        cookie = page.headers["set-cookie"]
        assert cookie.startswith("__Host-prism_session=")
        attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}
        assert {"secure", "path", "httponly", "samesite"} <= attributes and "domain" not in attributes
        assert "Path=/;" in cookie or cookie.endswith("Path=/")
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        signed = c.cookies.get("__Host-prism_session")
        assert signed and (await c.get("/console/")).headers["location"].startswith("/console/oversight/")
    # The cookie under its plain name (set before the deployment moved to https, or by another subdomain) is not
    # read: that browser signs in again.
    async with https_browser(https_app, ws.host) as old:
        old.cookies.set("prism_session", signed)
        assert (await old.get("/console/")).headers["location"].startswith("/login/")


async def test_under_http_no_hsts_and_the_plain_cookie_name(app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        page = await c.get("/login/")
    assert "strict-transport-security" not in page.headers
    cookie = page.headers["set-cookie"]
    assert cookie.startswith("prism_session=") and "secure" not in cookie.lower()
    assert "form-action 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize(("client", "source"), [("claude", "https://claude.ai"),
                                                 ("cursor", "cursor:"),
                                                 ("vscode", "http://127.0.0.1:33418")])
async def test_the_consent_page_lets_its_form_end_at_the_client_and_answers_with_a_303(
        app: object, factory: Factory, client: str, source: str) -> None:
    """`form-action 'self'` alone broke sign-in for every OAuth client in Chromium, which applies the directive
    to the redirects after a submission: the consent page allows its client's origin too."""
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        registered = await register(c, CLIENT_BODIES[client])
        redirect_uri = registered["redirect_uris"][0]
        _, challenge = pkce()
        params = authorize_params(registered["client_id"], challenge, redirect_uri=redirect_uri)
        assert (await sign_in(c, ws.emails["owner"])).status_code == 303
        page = await c.get(f"{OAUTH}/authorize/", params=params)
        assert page.status_code == 200, page.text
        assert page.headers["content-security-policy"].endswith(f"form-action 'self' {source}")
        answer = await consent(c, params, email=ws.emails["owner"])
    assert answer.status_code == 303 and answer.headers["location"].startswith(redirect_uri)


@pytest.mark.parametrize(("url", "source"), [
    ("https://Claude.AI/api/cb", "https://claude.ai"), ("http://[::1]:8080/cb", "http://[::1]:8080"),
    ("com.example.app:/callback", "com.example.app:"), ("https://*.example.com/cb", None),
    ("https://a.example;script-src */cb", None), ("https://a.example:99999/cb", None)])
def test_a_form_action_source_is_the_origin_or_the_private_scheme_and_never_wider(url: str, source: str | None) -> None:
    assert form_action_source(url) == source
