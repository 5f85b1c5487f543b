"""The webhooks API keys only the requests that change something (docs/idempotency.md, Stripe's semantics): a GET
or HEAD ignores Idempotency-Key, so it answers what is there now and a key it carries is never read."""

from __future__ import annotations

import httpx
import pytest

from prism.config import Settings
from tests.factories import Factory

WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
REPLAYED = "idempotent-replayed"


@pytest.fixture(autouse=True)
def _private_receivers(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)


async def test_a_keyed_read_answers_what_is_there_now(client: httpx.AsyncClient, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    keyed = {**ws.headers(), "Idempotency-Key": "list-1"}
    first = await client.get(WEBHOOKS, headers=keyed)
    assert first.status_code == 200 and first.json()["count"] == 0
    made = await client.post(WEBHOOKS, headers=ws.headers(), json={"name": "h", "url": "https://127.0.0.1:9/hook"})
    assert made.status_code == 201, made.text
    hook = made.json()["id"]
    again = await client.get(WEBHOOKS, headers=keyed)
    assert again.status_code == 200 and REPLAYED not in again.headers
    assert again.json()["count"] == 1
    renamed = await client.patch(f"{WEBHOOKS}{hook}/", headers=ws.headers(), json={"name": "renamed"})
    assert renamed.status_code == 200, renamed.text
    for _ in range(2):
        read = await client.get(f"{WEBHOOKS}{hook}/", headers={**ws.headers(), "Idempotency-Key": "read-1"})
        assert read.status_code == 200 and read.json()["name"] == "renamed" and REPLAYED not in read.headers
    # The same key on another organization's list: its own list, now.
    theirs = await client.get(WEBHOOKS, headers={**other.headers(), "Idempotency-Key": "list-1"})
    assert theirs.status_code == 200 and theirs.json()["count"] == 0


async def test_a_malformed_key_on_a_read_is_ignored_and_on_a_change_refused(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    overlong = {**ws.headers(), "Idempotency-Key": "x" * 300}
    assert (await client.get(WEBHOOKS, headers=overlong)).status_code == 200
    assert (await client.head(WEBHOOKS, headers=overlong)).status_code == 200
    refused = await client.post(WEBHOOKS, headers=overlong, json={"name": "h", "url": "https://127.0.0.1:9/hook"})
    assert refused.status_code == 400, refused.text


async def test_a_keyed_create_is_still_replayed(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    keyed = {**ws.headers(), "Idempotency-Key": "create-1"}
    body = {"name": "h", "url": "https://127.0.0.1:9/hook"}
    first, second = [await client.post(WEBHOOKS, headers=keyed, json=body) for _ in range(2)]
    assert first.status_code == second.status_code == 201
    assert second.headers.get(REPLAYED) == "true" and second.json()["id"] == first.json()["id"]
    assert (await client.get(WEBHOOKS, headers=ws.headers())).json()["count"] == 1
