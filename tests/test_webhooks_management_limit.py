"""PRISM_WEBHOOKS_PER_ORGANIZATION: every event is written once per subscribed webhook in the transaction of the
call that caused it (with `audit.entry_created`, every call, reads included), so an organization's webhooks are
capped; past the cap, creating one (or switching one back on) is 409 `webhook_limit_reached`."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from prism.auth.context import AuthContext
from prism.config import Settings
from prism.errors import Conflict
from prism.storage import Database
from prism.webhooks import service
from prism.webhooks.schemas import WebhookCreate
from tests.factories import Factory, Workspace
from tests.governance_support import owner_context

WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
URL = "https://127.0.0.1:9/hook"


@pytest.fixture(name="limited")
def limited_fixture(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhooks_per_organization", 3)
    return settings


async def _create(client: httpx.AsyncClient, ws: Workspace, name: str) -> httpx.Response:
    return await client.post(WEBHOOKS, headers=ws.headers(), json={"name": name, "url": URL})


def _is_limit_refusal(response: httpx.Response, limit: int) -> bool:
    body = response.json()
    return (response.status_code == 409 and body["error"] == "webhook_limit_reached"
            and f"{limit:,}" in body["message"] and body["details"]["limit"] == limit)


def test_the_setting_defaults_to_50_and_refuses_0() -> None:
    assert Settings().webhooks_per_organization == 50
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings(webhooks_per_organization=0)


async def test_an_organization_at_its_limit_cannot_add_one_and_another_organization_still_can(
        client: httpx.AsyncClient, factory: Factory, limited: Settings) -> None:
    full, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    made = [await _create(client, full, f"h{i}") for i in range(3)]
    assert [r.status_code for r in made] == [201, 201, 201]
    refused = await _create(client, full, "one too many")
    assert _is_limit_refusal(refused, 3), refused.text
    # Another organization's webhooks are its own to count.
    assert (await _create(client, other, "elsewhere")).status_code == 201
    # A webhook switched off still counts (it is kept, listed, and may be switched back on); a deleted one does not.
    first = made[0].json()["id"]
    off = await client.patch(f"{WEBHOOKS}{first}/", headers=full.headers(), json={"is_active": False})
    assert off.status_code == 200, off.text
    assert _is_limit_refusal(await _create(client, full, "still too many"), 3)
    assert (await client.delete(f"{WEBHOOKS}{first}/", headers=full.headers())).status_code == 204
    assert (await _create(client, full, "in its place")).status_code == 201
    listed = await client.get(WEBHOOKS, headers=full.headers())
    assert listed.json()["count"] == 3


async def test_switching_a_webhook_back_on_past_a_lowered_limit_is_refused(
        client: httpx.AsyncClient, factory: Factory, limited: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    ids = [(await _create(client, ws, f"h{i}")).json()["id"] for i in range(3)]
    other_id = (await _create(client, other, "theirs")).json()["id"]
    for hook in (ids[0], other_id):
        off = await client.patch(f"{WEBHOOKS}{hook}/", headers=(ws if hook == ids[0] else other).headers(),
                                 json={"is_active": False})
        assert off.status_code == 200, off.text
    monkeypatch.setattr(limited, "webhooks_per_organization", 2)
    on = await client.patch(f"{WEBHOOKS}{ids[0]}/", headers=ws.headers(), json={"is_active": True})
    assert _is_limit_refusal(on, 2), on.text
    # An active webhook stays changeable, and the other organization's switches back on under the same limit.
    renamed = await client.patch(f"{WEBHOOKS}{ids[1]}/", headers=ws.headers(), json={"name": "renamed"})
    assert renamed.status_code == 200, renamed.text
    theirs = await client.patch(f"{WEBHOOKS}{other_id}/", headers=other.headers(), json={"is_active": True})
    assert theirs.status_code == 200 and theirs.json()["is_active"] is True, theirs.text
    assert (await client.delete(f"{WEBHOOKS}{ids[1]}/", headers=ws.headers())).status_code == 204
    on = await client.patch(f"{WEBHOOKS}{ids[0]}/", headers=ws.headers(), json={"is_active": True})
    assert on.status_code == 200 and on.json()["is_active"] is True, on.text


async def test_a_create_waits_for_a_concurrent_one_and_then_counts_it(
        db: Database, factory: Factory, limited: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL two transactions run at once: each would count the webhooks the other has not committed yet,
    and both pass at one below the limit. The second waits on the organization's row until the first commits."""
    monkeypatch.setattr(limited, "webhooks_per_organization", 1)
    ws = await factory.workspace(roles=("owner",))
    auth = await owner_context(db, ws)
    async with db.write() as session:
        await service.create_webhook(session, auth, limited, WebhookCreate(name="first", url=URL), URL)
        second = asyncio.create_task(_create_in_own_transaction(db, auth, limited, "second"))
        await asyncio.sleep(0.5)
        assert not second.done(), "the second create did not wait for the first to commit"
    with pytest.raises(Conflict) as refused:
        await second
    assert refused.value.code == "webhook_limit_reached"


async def _create_in_own_transaction(db: Database, auth: AuthContext, settings: Settings, name: str) -> None:
    async with db.write() as session:
        await service.create_webhook(session, auth, settings, WebhookCreate(name=name, url=URL), URL)
