"""The login and consent pages in headless Chromium (Debian's /usr/bin/chromium) against a running server."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from playwright.async_api import Route, async_playwright

from tests.oauth_support import pkce
from tests.processes import Server, ServerPool, clean_env, free_port, run_cli, scratch_database

CHROMIUM = Path("/usr/bin/chromium")
EMAIL = "owner@browser.example.com"
STUDIO_EMAIL = "owner@studio.example.com"
STUDIO_ORGS: dict[str, str] = {}  # organization name -> id, filled by the server fixture
PASSWORD = "browser owner password"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log_dir: Path = tmp_path_factory.mktemp("oauth-browser")
    secret = secrets.token_urlsafe(40)
    with scratch_database(log_dir, "browser") as url:
        def cli(*args: str) -> Any:
            done = run_cli(*args, "--json", database_url=url, cwd=log_dir, PRISM_SECRET_KEY=secret)
            assert done.returncode == 0, str(done)
            return done.json

        assert run_cli("migrate", database_url=url, cwd=log_dir, PRISM_SECRET_KEY=secret).returncode == 0
        cli("tenant", "create", "shop", "--name", "Shop", "--admin-email", EMAIL, "--admin-password", PASSWORD)
        # A second tenant whose owner is in three organizations: Studio (made with the tenant), Sandbox, Production.
        STUDIO_ORGS["Studio"] = cli("tenant", "create", "studio", "--name", "Studio Works", "--admin-email",
                                    STUDIO_EMAIL, "--admin-password", PASSWORD)["organization"]["id"]
        for name in ("Sandbox", "Production"):
            STUDIO_ORGS[name] = cli("org", "create", name, "--tenant", "studio")["id"]
            cli("user", "add-to-org", STUDIO_EMAIL, "--tenant", "studio", "--org", STUDIO_ORGS[name], "--role",
                "owner")
        pool = ServerPool(log_dir)
        try:
            yield pool.start(env=clean_env(PRISM_DATABASE_URL=url, PRISM_SEED_DEMO="false", PRISM_SECRET_KEY=secret))
        finally:
            pool.stop_all()


async def test_a_person_signs_in_picks_the_organization_and_the_client_gets_a_working_code(server: Server) -> None:
    callback = f"http://127.0.0.1:{free_port()}/callback"
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        client = (await http.post("/api/mcp/oauth/register/", json={
            "client_name": "Browser test app", "redirect_uris": [callback]})).json()
    verifier, challenge = pkce()
    authorize = f"{server.base_url}/api/mcp/oauth/authorize/?" + urlencode({
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": callback, "state": "xyz",
        "code_challenge": challenge, "code_challenge_method": "S256", "scope": "mcp:read"})
    landed: list[str] = []

    async def catch_callback(route: Route) -> None:
        landed.append(route.request.url)
        await route.fulfill(status=200, body="done")

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = await chromium.new_page()
            await page.route(f"{callback}**", catch_callback)
            login = await page.goto(authorize)
            assert login is not None and "/login/" in page.url
            assert login.headers["x-frame-options"] == "DENY"
            assert "frame-ancestors 'none'" in login.headers["content-security-policy"]

            await page.fill("#email", EMAIL)
            await page.fill("#password", "not the password")
            await page.click("#sign-in")
            assert "Wrong email or password" in await page.inner_text("#login-error")

            await page.fill("#password", PASSWORD)
            await page.click("#sign-in")
            await page.wait_for_selector("#allow")
            assert "Browser test app" in await page.inner_text("h1")
            assert "Shop" in await page.inner_text("fieldset.tenant")  # its only organization, chosen already
            await page.click("#allow")
            await page.wait_for_timeout(200)
            for _ in range(50):
                if landed:
                    break
                await page.wait_for_timeout(100)
        finally:
            await chromium.close()

    assert landed, "the browser was never sent back to the client"
    returned = {k: v[0] for k, v in parse_qs(urlsplit(landed[0]).query).items()}
    assert returned["state"] == "xyz" and returned["iss"] == server.base_url
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        token = await http.post("/api/mcp/oauth/token/", data={
            "grant_type": "authorization_code", "code": returned["code"], "code_verifier": verifier,
            "client_id": client["client_id"], "redirect_uri": callback})
        assert token.status_code == 200, token.text
        me = await http.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {token.json()['access_token']}"})
    assert me.status_code == 200 and me.json()["user"]["email"] == EMAIL


async def test_the_consent_page_cannot_be_framed_by_another_site(server: Server) -> None:
    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = await chromium.new_page()
            await page.set_content(f'<iframe id="f" src="{server.base_url}/login/"></iframe>')
            await page.wait_for_timeout(1000)
            frame = next((f for f in page.frames if f.url.startswith(server.base_url)), None)
            content = await frame.content() if frame is not None else ""
        finally:
            await chromium.close()
    assert "Sign in to Prism" not in content


async def test_a_person_consents_to_two_organizations_and_the_token_acts_in_those_and_no_third(
        server: Server) -> None:
    callback = f"http://127.0.0.1:{free_port()}/callback"
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        client = (await http.post("/api/mcp/oauth/register/", json={
            "client_name": "Two organizations app", "redirect_uris": [callback]})).json()
    verifier, challenge = pkce()
    authorize = f"{server.base_url}/api/mcp/oauth/authorize/?" + urlencode({
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": callback, "state": "two",
        "code_challenge": challenge, "code_challenge_method": "S256", "scope": "mcp:read"})
    landed: list[str] = []

    async def catch_callback(route: Route) -> None:
        landed.append(route.request.url)
        await route.fulfill(status=200, body="done")

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = await chromium.new_page()
            await page.route(f"{callback}**", catch_callback)
            await page.goto(authorize)
            await page.fill("#email", STUDIO_EMAIL)
            await page.fill("#password", PASSWORD)
            await page.click("#sign-in")
            await page.wait_for_selector("#allow")
            # The server's address is the platform host: the page says whose organizations it offers.
            offered = await page.inner_text("#organizations-offered")
            assert "platform host" in offered and "Studio Works (studio)" in offered
            assert "Workspace Studio Works (studio)" in await page.inner_text("fieldset.tenant")
            await page.click("#allow")  # nothing chosen yet: the page asks again
            assert "Choose at least one organization" in await page.inner_text("#consent-error")
            await page.get_by_label("Sandbox").check()
            await page.get_by_label("Production").check()
            await page.click("#allow")
            for _ in range(50):
                if landed:
                    break
                await page.wait_for_timeout(100)
        finally:
            await chromium.close()

    assert landed, "the browser was never sent back to the client"
    returned = {k: v[0] for k, v in parse_qs(urlsplit(landed[0]).query).items()}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        token = await http.post("/api/mcp/oauth/token/", data={
            "grant_type": "authorization_code", "code": returned["code"], "code_verifier": verifier,
            "client_id": client["client_id"], "redirect_uri": callback})
        assert token.status_code == 200, token.text
        bearer = {"Authorization": f"Bearer {token.json()['access_token']}"}

        async def me_in(organization: str | None) -> httpx.Response:
            return await http.get("/api/v1/dev/me/", headers=bearer | (
                {"X-Organization-Context": STUDIO_ORGS[organization]} if organization else {}))

        default, sandbox, production, third = (await me_in(None), await me_in("Sandbox"), await me_in("Production"),
                                               await me_in("Studio"))
    # Production is listed before Sandbox, so it is the default.
    assert [a.json()["organization"]["id"] for a in (default, sandbox, production)] == [
        STUDIO_ORGS["Production"], STUDIO_ORGS["Sandbox"], STUDIO_ORGS["Production"]]
    assert third.status_code == 403 and third.json()["error"] == "organization_not_consented"


async def test_a_signed_in_person_following_a_phishing_link_stays_on_prisms_error_page(server: Server) -> None:
    """An attacker registers a client whose redirect URI is their site and sends a link with a bad request: the
    browser of a person already signed in stays on Prism's error page (RFC 9700 4.11.2), nothing takes it on."""
    evil = "https://evil.example/cb"
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        attacker = (await http.post("/api/mcp/oauth/register/", json={
            "client_name": "Totally Legit", "redirect_uris": [evil], "token_endpoint_auth_method": "none"})).json()
    phishing = f"{server.base_url}/api/mcp/oauth/authorize/?" + urlencode({
        "response_type": "token", "client_id": attacker["client_id"], "redirect_uri": evil, "state": "lure"})
    requested: list[str] = []  # every URL the page asks for, a redirect's target included

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = await chromium.new_page()
            page.on("request", lambda sent: requested.append(sent.url))
            await page.goto(f"{server.base_url}/login/")
            await page.fill("#email", EMAIL)
            await page.fill("#password", PASSWORD)
            await page.click("#sign-in")
            await page.wait_for_load_state()
            shown = await page.goto(phishing)
            await page.wait_for_timeout(1000)  # time for any refresh or script to take the browser on
            assert shown is not None and shown.status == 400
            assert page.url == phishing
            assert await page.inner_text("#error-code") == "unsupported_response_type"
            assert await page.inner_text("#redirect-host") == "evil.example"
        finally:
            await chromium.close()
    assert not [url for url in requested if "evil.example" in urlsplit(url).netloc], requested
