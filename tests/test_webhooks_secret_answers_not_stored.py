"""An answer that shows a webhook's signing secret (its creation, the 201 of POST webhooks, and a rotation on the
canonical doors, a replay of either under its Idempotency-Key too) says `Cache-Control: no-store`, as the keys
endpoints do: no cache between Prism and the caller keeps a copy. Answers without a secret are left as they are."""

from __future__ import annotations

import uuid

import httpx

from tests.factories import Factory
from tests.governance_support import post
from tests.webhooks_fixtures import BASE

URL = "https://127.0.0.1:9/receiver"


def _not_stored(response: httpx.Response) -> None:
    assert response.headers.get("cache-control") == "no-store", response.headers
    assert response.headers.get("pragma") == "no-cache", response.headers


async def test_creating_a_webhook_answers_its_secret_not_to_be_stored(hook_client: httpx.AsyncClient,
                                                                      factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    key = {"Idempotency-Key": uuid.uuid4().hex}
    created = await hook_client.post(BASE, json={"name": "n", "url": URL}, headers={**ws.headers(), **key})
    assert created.status_code == 201 and created.json()["secret"], created.text
    _not_stored(created)
    replayed = await hook_client.post(BASE, json={"name": "n", "url": URL}, headers={**ws.headers(), **key})
    assert replayed.headers.get("idempotent-replayed") == "true" and replayed.json()["secret"], replayed.headers
    _not_stored(replayed)
    listed = await hook_client.get(BASE, headers=ws.headers())
    assert listed.status_code == 200 and "cache-control" not in listed.headers


async def test_a_rotated_secret_is_answered_not_to_be_stored(hook_client: httpx.AsyncClient,
                                                             factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    created = await hook_client.post(BASE, json={"name": "n", "url": URL}, headers=ws.headers())
    hook_id = created.json()["id"]
    rotated = await post(hook_client, ws, "config_manage/governance/webhook/rotate_secret", {"id": hook_id})
    assert rotated.status_code == 200 and rotated.json()["data"]["secret"], rotated.text
    _not_stored(rotated)
    by_path = await hook_client.post("/prism/config_manage/governance/webhook/rotate_secret", json={"id": hook_id},
                                     headers=ws.headers())
    assert by_path.status_code == 200 and by_path.json()["data"]["secret"], by_path.text
    _not_stored(by_path)
    read = await post(hook_client, ws, "config_manage/governance/webhook/read", {"id": hook_id})
    assert read.status_code == 200 and "cache-control" not in read.headers
