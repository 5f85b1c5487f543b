"""An answer that shows a webhook's signing secret (its creation, the 201 of POST webhooks, and a rotation on the
canonical doors and the sandbox's call, a replay of either under its Idempotency-Key too) says `Cache-Control:
no-store`, as the keys endpoints do: no cache between Prism and the caller keeps a copy. Answers without a secret
are left as they are. The MCP door says `no-store` (and `Pragma: no-cache`) on every answer, a secret's included."""

from __future__ import annotations

import uuid

import httpx

from tests.factories import Factory
from tests.governance_support import post
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text
from tests.webhooks_fixtures import BASE

URL = "https://127.0.0.1:9/receiver"
SANDBOX_CALL = "/api/v1/dev/call/"


def _webhook_call(operation: str, arguments: dict[str, str]) -> dict[str, object]:
    return {"name": "prism_config_manage", "arguments": {"app": "governance", "entity": "webhook",
                                                         "operation": operation, "arguments": arguments}}


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


async def test_the_sandbox_call_answers_a_secret_not_to_be_stored(hook_client: httpx.AsyncClient,
                                                                  factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    keyed = {**ws.headers(), "Idempotency-Key": uuid.uuid4().hex}
    created = await hook_client.post(SANDBOX_CALL, json=_webhook_call("create", {"name": "n", "url": URL}),
                                     headers=keyed)
    assert created.status_code == 200 and created.json()["secret"].startswith("whk_secret_"), created.text
    _not_stored(created)
    replayed = await hook_client.post(SANDBOX_CALL, json=_webhook_call("create", {"name": "n", "url": URL}),
                                      headers=keyed)
    assert replayed.headers.get("idempotent-replayed") == "true", replayed.headers
    assert replayed.json()["secret"] == created.json()["secret"]
    _not_stored(replayed)
    hook_id = created.json()["id"]
    rotated = await hook_client.post(SANDBOX_CALL, json=_webhook_call("rotate_secret", {"id": hook_id}),
                                     headers=ws.headers())
    assert rotated.status_code == 200 and rotated.json()["secret"] != created.json()["secret"], rotated.text
    _not_stored(rotated)
    read = await hook_client.post(SANDBOX_CALL, json=_webhook_call("read", {"id": hook_id}), headers=ws.headers())
    assert read.status_code == 200 and "cache-control" not in read.headers and "pragma" not in read.headers


async def test_the_mcp_door_answers_a_secret_not_to_be_stored(hook_client: httpx.AsyncClient,
                                                              factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    headers = headers_for(ws)
    session = await initialize(hook_client, headers)
    created = await call(hook_client, headers, session, rpc("tools/call", _webhook_call(
        "create", {"name": "n", "url": URL})))
    is_error, envelope = tool_text(created)
    assert not is_error and envelope["data"]["secret"].startswith("whk_secret_"), envelope
    _not_stored(created)
