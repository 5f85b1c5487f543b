"""The key dashboard in a real headless Chromium against a real server: sign in, mint a key, use it, revoke it."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from prism.app import create_app
from prism.config import Settings
from tests.factories import PASSWORD, Factory

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(settings: Settings) -> Iterator[str]:
    """Prism served by uvicorn on a real port, in a thread with its own event loop, on the test database."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


async def test_a_user_signs_in_mints_a_working_key_and_revokes_it_in_chromium(
        server_url: str, factory: Factory) -> None:
    from playwright.async_api import async_playwright

    ws = await factory.workspace(roles=("member",))
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{server_url}/keys/")
            assert "/login/" in page.url
            await page.fill("#email", ws.emails["member"])
            await page.fill("#password", PASSWORD)
            await page.click("#sign-in")
            await page.wait_for_url(f"{server_url}/keys/")
            assert await page.text_content("#user-email") == ws.emails["member"]
            assert ws.keys["member"][:15] in await page.content()

            await page.fill("#name", "browser key")
            await page.uncheck("input[name='mcp:execute']")
            await page.fill("#expires_days", "7")
            await page.click("#create-key")
            await page.wait_for_selector("#new-key-value")
            plaintext = (await page.text_content("#new-key-value") or "").strip()
            assert plaintext.startswith("ck_") and len(plaintext) == 43

            async with httpx.AsyncClient(base_url=server_url) as http:
                me = await http.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {plaintext}"})
                assert me.status_code == 200, me.text
                assert me.json()["key"]["name"] == "browser key"
                assert me.json()["key"]["scopes"] == ["mcp:read", "mcp:write"]

                await page.goto(f"{server_url}/keys/")
                assert plaintext not in await page.content()
                row = page.locator(f"tr[data-prefix='{plaintext[:15]}']")
                await row.locator("button.revoke").click()
                await page.wait_for_url(f"{server_url}/keys/")
                assert await row.locator("td.status-revoked").count() == 1
                refused = await http.get("/api/v1/dev/me/", headers={"Authorization": f"Bearer {plaintext}"})
                assert refused.status_code == 401
        finally:
            await browser.close()
