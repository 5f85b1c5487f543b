"""integration_call/integrations/endpoint/call: what the caller gets when the upstream answers something the
call log or the doors cannot take as it is."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from prism.config import Settings
from tests.domain_support import Caller
from tests.factories import Factory
from tests.webhooks_receiver import Answer, Receiver, RunningReceiver, TlsFiles, make_tls


@pytest.fixture
def private_networks_allowed(tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> TlsFiles:
    tls = make_tls(tmp_path)
    monkeypatch.setattr(settings, "webhook_allow_private_networks", True)
    monkeypatch.setattr(settings, "webhook_ca_bundle", str(tls.ca))
    return tls


@pytest.fixture
async def receiver(private_networks_allowed: TlsFiles) -> AsyncIterator[Receiver]:
    running = RunningReceiver(private_networks_allowed)
    yield await running.start()
    await running.stop()


async def test_an_answer_with_a_nul_character_is_logged_and_passed_on(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Nul", "base_url": receiver.url("/api")})
    receiver.script("/api/x", [Answer(status=200, body="before\x00after", headers={"content-type": "text/plain"})])
    status, body = await c.raw("integration_call", "integrations", "endpoint", "call",
                               {"id": endpoint["id"], "path": "/x"})
    assert status == 200, body
    assert body["data"]["ok"] is True and body["data"]["call_log_id"]
    logs = await c.ok("entity_crud", "integrations", "call_log", "list", {"endpoint_id": endpoint["id"]})
    assert len(logs["items"]) == 1


async def test_an_answer_nested_too_deep_to_pass_on_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Deep", "base_url": receiver.url("/api")})
    receiver.script("/api/deep", [Answer(status=200, body="[" * 300 + "]" * 300,
                                         headers={"content-type": "application/json"})])
    r = await client.post("/api/mcp/tools/prism_integration_call/", headers=c.ws.headers(), json={
        "app": "integrations", "entity": "endpoint", "operation": "call",
        "arguments": {"id": endpoint["id"], "path": "/deep"}})
    assert r.status_code != 500, r.text
    json.loads(r.text)


async def test_a_keyed_call_whose_answer_cannot_be_stored_still_replays_its_first_answer(
        client: httpx.AsyncClient, factory: Factory, receiver: Receiver) -> None:
    """docs/idempotency.md: the final answer of a call finishing after its commit "is kept whatever it is, a
    failure included"; only a process that died leaves the key in progress."""
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    endpoint = await c.create("integrations", "endpoint", {"name": "Deep", "base_url": receiver.url("/api")})
    receiver.script("/api/deep", [Answer(status=200, body="[" * 300 + "]" * 300,
                                         headers={"content-type": "application/json"})])
    headers = {**c.ws.headers(), "Idempotency-Key": "deep-answer-1"}
    request = {"app": "integrations", "entity": "endpoint", "operation": "call",
               "arguments": {"id": endpoint["id"], "path": "/deep"}}
    first = await client.post("/api/mcp/tools/prism_integration_call/", headers=headers, json=request)
    again = await client.post("/api/mcp/tools/prism_integration_call/", headers=headers, json=request)
    assert len(receiver.at("/api/deep")) == 1
    assert again.json().get("error") != "idempotency_key_in_progress", again.text
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert again.headers.get("idempotent-replayed") == "true"
