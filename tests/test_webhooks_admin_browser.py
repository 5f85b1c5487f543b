"""The webhook admin page in a real headless Chromium against a real server and a real HTTPS receiver."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from sqlalchemy import select

from prism.app import create_app
from prism.config import Settings
from prism.models import User
from prism.models.audit import AuditEntry
from prism.storage import Database
from tests.factories import PASSWORD, Factory
from tests.webhooks_fixtures import create_hook, unique_path
from tests.webhooks_receiver import Receiver

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
PAGE = "/admin/integrations/webhooks/"

pytestmark = pytest.mark.skipif(not shutil.which("chromium"), reason="chromium is not installed")


@pytest.fixture(scope="module")
def server_url(hook_settings: Settings) -> Iterator[str]:
    """Prism with its in-process delivery worker, served by uvicorn in a thread on the test database."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    settings = hook_settings.model_copy(update={"webhook_worker_in_process": True})
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


async def test_an_admin_sends_a_test_event_and_resends_it_from_the_page(
        server_url: str, hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        hook_db: Database) -> None:
    from playwright.async_api import async_playwright

    ws = await factory.workspace(roles=("owner", "viewer"))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path), name="SIEM receiver")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            response = await page.goto(f"{server_url}{PAGE}")
            assert "/login/" in page.url
            await page.fill("#email", ws.emails["owner"])
            await page.fill("#password", PASSWORD)
            await page.click("#sign-in")
            await page.wait_for_url(f"{server_url}{PAGE}")
            assert "SIEM receiver" in await page.content()
            assert hook["secret"] not in await page.content()

            await page.click(f"#send-test-{hook['id']}")
            await page.wait_for_selector("#admin-notice")
            [got] = await receiver.wait_for(path, 1)
            assert '"test":true' in got.body.decode()
            row = page.locator("tr.delivery[data-test='true']")
            for _ in range(50):  # the worker records the outcome a moment after the receiver answered
                await page.reload()
                if await page.locator("tr.delivery[data-status='success']").count() == 1:
                    break
                await asyncio.sleep(0.1)
            assert await row.count() == 1
            assert await row.get_attribute("data-status") == "success"

            await row.locator("button.resend").click()
            await page.wait_for_selector("#admin-notice")
            await receiver.wait_for(path, 2)
            response = await page.goto(f"{server_url}{PAGE}")
            assert response is not None
            assert response.headers["x-frame-options"] == "DENY"
            assert "no-store" in response.headers["cache-control"]
            # Signed in, but a form without the session's CSRF token (a cross-site post) changes nothing.
            forged = await page.request.post(f"{server_url}{PAGE}{hook['id']}/test/",
                                              form={"organization": ws.org.id}, max_redirects=0)
            assert forged.status == 403
        finally:
            await browser.close()
    async with httpx.AsyncClient(base_url=server_url) as http:  # signed out: the action sends to login
        anonymous = await http.post(f"{PAGE}{hook['id']}/test/", data={"organization": ws.org.id})
        assert anonymous.status_code == 303 and "/login/" in anonymous.headers["location"]
    await asyncio.sleep(0.5)
    assert len(receiver.at(path)) == 2
    # The page's actions are dispatched, as the console's are: each is in the audit ledger.
    async with hook_db.read() as session:
        owner = (await session.execute(select(User.id).where(User.email == ws.emails["owner"]))).scalar_one()
        entries = (await session.execute(select(AuditEntry.coordinate, AuditEntry.actor_user_id,
                                                AuditEntry.credential_id).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.door == "console").order_by(AuditEntry.id))).all()
    assert [tuple(e)[:2] for e in entries] == [("config_manage/governance/webhook/test", owner),
                                               ("config_manage/governance/webhook_delivery/resend", owner)]
    # Under the sign-in's credential, as on the console and the key dashboard: one caller for every page.
    assert all(e.credential_id.startswith("console:") for e in entries), entries


async def test_a_viewer_sees_their_organizations_webhooks_without_buttons_and_no_others(
        server_url: str, hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        hook_db: Database) -> None:
    from playwright.async_api import async_playwright

    ws = await factory.workspace(roles=("owner", "viewer"))
    other = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, receiver.url(unique_path()), name="Viewer-visible")
    foreign = await create_hook(hook_client, other, receiver.url(unique_path()), name="Foreign receiver")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{server_url}/login/?next={PAGE}")
            await page.fill("#email", ws.emails["viewer"])
            await page.fill("#password", PASSWORD)
            await page.click("#sign-in")
            await page.wait_for_url(f"{server_url}{PAGE}")
            content = await page.content()
            assert "Viewer-visible" in content and "Foreign receiver" not in content
            assert await page.locator(f"#send-test-{hook['id']}").count() == 0
            assert await page.locator(f"#webhook-{foreign['id']}").count() == 0
        finally:
            await browser.close()
