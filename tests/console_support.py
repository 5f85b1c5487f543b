"""Driving the console in Debian's headless Chromium: a live server, sign-in, axe-core, screenshots.

axe-core comes from the npm registry (bin/_tools.sh installs it under .cache/axe-core); it is injected into each
page the tests visit (the browser context bypasses the page's CSP for that script only). Screenshots are kept
under $PRISM_TEST_ARTIFACTS (default .cache/artifacts/console), one per page and role.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from prism.app import create_app
from prism.config import Settings
from tests.factories import PASSWORD

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Every *.localhost tenant host reaches the loopback server, whatever the machine's resolver says.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP *.localhost 127.0.0.1"]
AXE = ROOT / ".cache" / "axe-core" / "node_modules" / "axe-core" / "axe.min.js"
AXE_INSTALL = ("npm install --prefix .cache/axe-core --no-save --no-package-lock --no-audit --no-fund "
               "axe-core@4.11.0")
ARTIFACTS = Path(os.environ.get("PRISM_TEST_ARTIFACTS", ROOT / ".cache" / "artifacts")) / "console"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(settings: Settings) -> Iterator[int]:
    """Prism served by uvicorn on a real port, in a thread with its own event loop, on the test database."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def require_tools() -> None:
    if not shutil.which("chromium"):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed: {AXE_INSTALL}")


async def sign_in(page: Any, base: str, email: str) -> None:
    await page.goto(f"{base}/console/")
    assert "/login/" in page.url
    await page.fill("#email", email)
    await page.fill("#password", PASSWORD)
    await page.click("#sign-in")
    await page.wait_for_url(f"{base}/console/oversight/**")


async def check_page(page: Any, name: str) -> None:
    """No serious or critical axe-core violation on the page as it is now; a screenshot kept as an artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.add_script_tag(path=str(AXE))
    result = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    serious = [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:12]}"
               for v in result["violations"] if v["impact"] in ("serious", "critical")]
    assert not serious, f"{name}: {serious}"


async def no_horizontal_scroll(page: Any) -> None:
    """At the page's width (390 px on a phone) nothing but a table's own scroller runs off the side."""
    overflow = await page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    if overflow > 1:
        wide = await page.evaluate("""() => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1
                    && !e.closest('.table-wrap'))
            .slice(0, 5).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className)""")
        raise AssertionError(f"the page is {overflow}px wider than the screen: {wide}")
