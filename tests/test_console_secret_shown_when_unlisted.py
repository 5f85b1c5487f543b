"""A key or a webhook secret made on the console is committed before the answering page lists anything: when
that listing (or the webhook's read) is refused, a busy database's 503, the page must still show the plaintext,
once, with a note that the list cannot be shown now (as /keys/ does). Otherwise the key stays active, or the
webhook signs with a secret, that nobody ever saw.

The busy database is the one refusal injected: the console's listing and reading calls raise
DatabaseUnavailable, as the database pool does when it has no connection to give; the create, the rotation and
everything else run for real."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import select

from prism.console.caller import ConsoleCaller
from prism.storage import Database
from prism.storage.errors import DatabaseUnavailable
from prism.webhooks.models import Webhook
from tests.factories import Factory, Workspace
from tests.governance_support import ok
from tests.oauth_support import browser, field, sign_in

RECEIVER = "https://93.184.215.14/hook"  # a public address literal: no DNS, nothing is sent
SECRET = re.compile(r'id="new-secret-value">(whk_secret_[^<]+)<')


def busy_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on every listing and reading the console dispatches meets a busy database."""
    real = ConsoleCaller.call

    async def call(self: ConsoleCaller, request: Any, coordinate: str, arguments: dict[str, Any]) -> Any:
        if coordinate.rsplit("/", 1)[1] in ("list", "read"):
            raise DatabaseUnavailable()
        return await real(self, request, coordinate, arguments)

    monkeypatch.setattr(ConsoleCaller, "call", call)


async def _hooks(db: Database, ws: Workspace) -> list[Webhook]:
    async with db.read() as s:
        return list((await s.execute(select(Webhook).where(Webhook.organization_id == ws.org.id))).scalars())


async def test_a_key_minted_while_the_keys_cannot_be_listed_is_shown_once(
        app: Any, client: Any, factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/keys/")).status_code == 303
        token = field((await c.get("/console/keys/", params=org)).text, "csrf_token")
        busy_reads(monkeypatch)
        minted = await c.post("/console/keys/", params=org, data={"csrf_token": token, "name": "laptop",
                                                                  "mcp:read": "1"})
        again = await c.get("/console/keys/", params=org)
        monkeypatch.undo()
    assert minted.status_code == 201, minted.text[-800:]
    shown = re.search(r'id="new-key-value">(ck_[A-Za-z0-9]{40})<', minted.text)
    assert shown, minted.text[-800:]
    assert 'id="keys-unlisted"' in minted.text and "cannot be listed right now" in minted.text
    assert "database_unavailable" in minted.text
    # Shown once: the next page still cannot list, says so, and never shows the plaintext again.
    assert again.status_code == 200 and 'id="keys-unlisted"' in again.text
    assert shown.group(1) not in again.text
    # The key shown is the active key the handler committed, in this tenant's organization only.
    keys = (await ok(client, ws, "config_manage/keys/key/list", {}))["items"]
    assert [(k["name"], k["status"]) for k in keys if k["name"] == "laptop"] == [("laptop", "active")]
    assert shown.group(1).startswith(next(k["prefix"] for k in keys if k["name"] == "laptop"))
    elsewhere = (await ok(client, other, "config_manage/keys/key/list", {}))["items"]
    assert all(k["name"] != "laptop" for k in elsewhere)


async def test_a_webhook_created_while_the_webhooks_cannot_be_listed_shows_its_secret(
        app: Any, factory: Factory, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        token = field((await c.get("/console/webhooks/", params=org)).text, "csrf_token")
        busy_reads(monkeypatch)
        made = await c.post("/console/webhooks/", params=org, data={"csrf_token": token, "name": "receiver",
                                                                    "url": RECEIVER})
        monkeypatch.undo()
    assert made.status_code == 201, made.text[-800:]
    assert SECRET.search(made.text), made.text[-800:]
    assert 'id="webhooks-unlisted"' in made.text and "cannot be listed right now" in made.text
    assert [h.name for h in await _hooks(db, ws)] == ["receiver"]  # committed, in this organization
    assert await _hooks(db, other) == []


async def test_a_secret_rotated_while_the_webhook_cannot_be_read_is_shown(
        app: Any, factory: Factory, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    org = {"org": ws.org.id}
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path="/console/")).status_code == 303
        token = field((await c.get("/console/webhooks/", params=org)).text, "csrf_token")
        made = await c.post("/console/webhooks/", params=org, data={"csrf_token": token, "name": "receiver",
                                                                    "url": RECEIVER})
        first = SECRET.search(made.text)
        assert made.status_code == 201 and first, made.text[-800:]
        (hook,) = await _hooks(db, ws)
        busy_reads(monkeypatch)
        rotated = await c.post(f"/console/webhooks/{hook.id}/rotate/", params=org, data={"csrf_token": token})
        monkeypatch.undo()
    (after,) = await _hooks(db, ws)
    assert after.sealed != hook.sealed  # the rotation was committed
    assert rotated.status_code == 200, rotated.text[-800:]
    second = SECRET.search(rotated.text)
    assert second and second.group(1) != first.group(1), rotated.text[-800:]
    assert "cannot be read right now" in rotated.text and "database_unavailable" in rotated.text
    # Another tenant's owner cannot rotate it: not found there, nothing shown, nothing changed.
    async with browser(app, other.host) as c:
        assert (await sign_in(c, other.emails["owner"], next_path="/console/")).status_code == 303
        token = field((await c.get("/console/webhooks/", params={"org": other.org.id})).text, "csrf_token")
        foreign = await c.post(f"/console/webhooks/{hook.id}/rotate/", params={"org": other.org.id},
                               data={"csrf_token": token})
    assert foreign.status_code == 404, foreign.status_code
    assert not SECRET.search(foreign.text)
    (unchanged,) = await _hooks(db, ws)
    assert unchanged.sealed == after.sealed
