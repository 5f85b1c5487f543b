"""The webhook admin page lists the newest webhooks of each organization, not all of them, and reads their recent
deliveries in one statement, not one per webhook."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from prism.config import Settings
from prism.storage import Database
from prism.webhooks import service
from prism.webhooks.admin import LISTED_WEBHOOKS, RECENT_DELIVERIES, newest_of
from prism.webhooks.schemas import WebhookCreate
from tests.factories import Factory, Workspace
from tests.governance_support import owner_context
from tests.oauth_support import browser, sign_in

PAGE = "/admin/integrations/webhooks/"
URL = "https://receiver.example/hook"


async def _webhooks(db: Database, settings: Settings, ws: Workspace, count: int) -> list[str]:
    """`count` webhooks, oldest first, made as the API makes them (the limit raised to hold them)."""
    roomy = settings.model_copy(update={"webhooks_per_organization": count})
    auth = await owner_context(db, ws)
    async with db.write() as s:
        return [(await service.create_webhook(s, auth, roomy, WebhookCreate(name=f"hook {i}", url=URL), URL))["id"]
                for i in range(count)]


async def _test_events(db: Database, ws: Workspace, webhook_id: str, count: int) -> None:
    auth = await owner_context(db, ws)
    async with db.write() as s:
        for _ in range(count):
            await service.send_test_event(s, auth, webhook_id)


async def test_the_page_lists_the_newest_webhooks_with_their_deliveries_in_one_statement(
        app: Any, db: Database, factory: Factory, settings: Settings) -> None:
    big, small = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    many = await _webhooks(db, settings, big, LISTED_WEBHOOKS + 5)
    newest, older = many[-1], many[-3]
    await _test_events(db, big, newest, RECENT_DELIVERIES + 2)
    await _test_events(db, big, older, 2)
    theirs = await _webhooks(db, settings, small, 2)
    await _test_events(db, small, theirs[0], 1)

    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    engines = {db.engine.sync_engine, db.read_engine.sync_engine}
    async with browser(app, big.host) as c:
        assert (await sign_in(c, big.emails["owner"], next_path=PAGE)).status_code == 303
        for engine in engines:
            event.listen(engine, "before_cursor_execute", seen)
        try:
            page = await c.get(PAGE)
        finally:
            for engine in engines:
                event.remove(engine, "before_cursor_execute", seen)
    assert page.status_code == 200, page.text[:300]
    html = page.text
    assert html.count('class="webhook"') == LISTED_WEBHOOKS
    assert f"The {LISTED_WEBHOOKS} newest of {LISTED_WEBHOOKS + 5}; the API lists them all." in html
    assert f'id="webhook-{newest}"' in html and f'id="webhook-{many[0]}"' not in html  # the oldest are left out
    assert html.count('class="delivery"') == RECENT_DELIVERIES + 2  # 10 of the newest's 12, the other's 2
    assert not any(f'id="webhook-{hook}"' in html for hook in theirs)  # another tenant's are not on its page
    reads = [s for s in statements if "webhook_deliveries" in s]
    assert len(reads) == 1, f"{len(reads)} statements read deliveries"

    async with browser(app, small.host) as c:
        assert (await sign_in(c, small.emails["owner"], next_path=PAGE)).status_code == 303
        their_page = (await c.get(PAGE)).text
    assert their_page.count('class="webhook"') == 2 and their_page.count('class="delivery"') == 1
    assert "newest of" not in their_page
    assert f'id="webhook-{newest}"' not in their_page


def test_the_page_says_when_it_lists_only_the_newest() -> None:
    assert newest_of(LISTED_WEBHOOKS, 3000) == "The 100 newest of 3,000; the API lists them all."
    assert newest_of(7, 7) is None
