"""docs/idempotency.md: a key's fingerprint names the door ("same key, another request (another body, tool, door or
organization): 409 idempotency_key_reused"), so a replay is always rendered by the door that answered first."""

from __future__ import annotations

import httpx
import pytest

from prism.config import Settings
from tests.factories import Factory

WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"


async def test_a_key_first_used_on_the_webhooks_api_is_not_replayed_by_the_canonical_door(
        client: httpx.AsyncClient, factory: Factory, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    ws = await factory.workspace(roles=("owner",))
    arguments = {"name": "door test", "url": "https://127.0.0.1:9/hook"}
    headers = {**ws.headers(), "Idempotency-Key": "one-key-two-doors"}
    created = await client.post(WEBHOOKS, headers=headers, json=arguments)
    assert created.status_code == 201, created.text
    again = await client.post("/api/mcp/tools/prism_config_manage/", headers=headers, json={
        "app": "governance", "entity": "webhook", "operation": "create", "arguments": arguments})
    # Another door: refused as another request, not the webhooks API's 201 replayed as a canonical 200 envelope.
    assert again.status_code == 409 and again.json()["error"] == "idempotency_key_reused", again.text
