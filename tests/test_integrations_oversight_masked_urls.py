"""A held `addMcp`, `connection/set`, endpoint save or endpoint call keeps its arguments for the reviewers with every
secret masked: the credential whole, a key written into a URL's query with its value withheld (`?token=********`),
each of an endpoint call's query parameters with its value withheld (`{"api_key": "********"}`), in the stored
request and in every answer and page that shows it. The approval stays bound to the arguments as sent (their
digest): the approved call, sent again with the real values, runs with them. Real upstreams on loopback."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import governed_key, ok, post
from tests.integrations_mcp_upstream import UPSTREAM_KEY, RunningMcp
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS
    RunningService,
    SpecService,
    upstream_tls_fixture,
)
from tests.oauth_support import browser, sign_in
from tests.test_integrations_url_secrets import ITEMS, texts_holding
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

MASK = "********"


async def held_then_approved(client: httpx.AsyncClient, ws: Workspace, path: str, arguments: dict[str, Any],
                             token: str) -> tuple[dict[str, Any], Any]:
    """The agent's call held, what its reviewers are shown (never `token`), and the data of the approved repeat."""
    escalated = await post(client, ws, path, arguments, label="agent")
    assert escalated.status_code == 202 and escalated.json()["error"] == "oversight_required", escalated.text
    request_id = escalated.json()["details"]["oversight_request_id"]
    shown = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
    listed = await ok(client, ws, "governance_review/governance/oversight_request/list", {"page_size": 100})
    assert token not in json.dumps(shown) and token not in json.dumps(listed)
    await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    approved = await post(client, ws, path, arguments, label="agent",
                          headers={"X-Prism-Oversight-Request": request_id})
    assert approved.status_code == 200, approved.text
    return shown["arguments"], approved.json()["data"]


async def test_held_integration_calls_keep_their_url_keys_masked_and_run_with_them_once_approved(
        client: httpx.AsyncClient, factory: Factory, db: Database, tls: TlsFiles) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={
        "name": "reviewed-integrations", "default": "allow",
        "oversight": ["config_manage/integrations/integration/addMcp", "config_manage/integrations/connection/set",
                      "entity_crud/integrations/endpoint/create"]})
    token = "s3cret" + uuid.uuid4().hex  # one per run: the suite's database is shared
    mcp, oas = "mcp_" + uuid.uuid4().hex[:8], "oas_" + uuid.uuid4().hex[:8]
    upstream = await RunningMcp(tls).start()
    upstream.gate.query = f"token={token}".encode()  # refused without the key in its URL
    service = SpecService(ITEMS, base_path="/v2", required_query={"api_key": token})
    running = RunningService(service, tls)
    await running.start()
    try:
        shown, added = await held_then_approved(client, ws, "config_manage/integrations/integration/addMcp", {
            "name": mcp, "url": f"{upstream.url}?token={token}", "auth_kind": "api_key",
            "header": "X-Upstream-Key", "secret": UPSTREAM_KEY}, token)
        assert shown["url"] == f"{upstream.url}?token={MASK}" and shown["secret"] == MASK, shown
        assert shown["header"] == "X-Upstream-Key"  # what is no secret is shown as sent
        assert "tool/getForecast" in added["added"]
        forecast = await post(client, ws, f"integration_call/{mcp}/tool/getForecast", {"city": "Oslo"}, label="agent")
        assert forecast.status_code == 200, forecast.text

        await ok(client, ws, "config_manage/integrations/integration/importOpenapi", {"name": oas, "spec": ITEMS})
        shown, connected = await held_then_approved(client, ws, "config_manage/integrations/connection/set", {
            "name": oas, "base_url": f"{service.url()}?api_key={token}", "auth_kind": "oauth2_client_credentials",
            "token_url": f"{service.url()}/oauth/token?tenant={token}", "client_id": "prism", "secret": "cs"}, token)
        assert shown["base_url"] == f"{service.url()}?api_key={MASK}", shown
        assert shown["token_url"] == f"{service.url()}/oauth/token?tenant={MASK}" and shown["secret"] == MASK
        assert connected["base_url"] == f"{service.url()}?api_key={MASK}"

        shown, endpoint = await held_then_approved(client, ws, "entity_crud/integrations/endpoint/create", {
            "name": "Stock", "base_url": f"{service.url()}?api_key={token}", "default_method": "GET"}, token)
        assert shown["base_url"] == f"{service.url()}?api_key={MASK}" and shown["name"] == "Stock", shown
        item = await ok(client, ws, "integration_call/integrations/endpoint/call",
                        {"id": endpoint["id"], "path": "/items/7"})
        assert item["ok"] is True and not service.invalid, item  # the approved save kept the real key

        assert await texts_holding(db, token) == []
    finally:
        await upstream.stop()
        await running.stop()


async def test_a_held_endpoint_call_shows_its_query_values_withheld_and_runs_with_them_once_approved(
        app: Any, client: httpx.AsyncClient, factory: Factory, db: Database, tls: TlsFiles) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", risk_level="high", persona={
        "name": "reviewed-calls", "default": "allow", "oversight": ["integration_call/integrations/endpoint/call"]})
    token = "s3cret" + uuid.uuid4().hex  # one per run: the suite's database is shared
    service = SpecService(ITEMS, base_path="/v2", required_query={"api_key": token})  # refused without the key
    running = RunningService(service, tls)
    await running.start()
    try:
        endpoint = await ok(client, ws, "entity_crud/integrations/endpoint/create", {
            "name": "Stock", "base_url": service.url(), "default_method": "GET"})
        arguments = {"id": endpoint["id"], "path": "/items/7", "query": {"api_key": token, "fields": "name"}}
        escalated = await post(client, ws, "integration_call/integrations/endpoint/call", arguments, label="agent")
        assert escalated.status_code == 202 and escalated.json()["error"] == "oversight_required", escalated.text
        request_id = escalated.json()["details"]["oversight_request_id"]
        assert service.arrived == []  # held: nothing sent

        shown = await ok(client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
        listed = await ok(client, ws, "governance_review/governance/oversight_request/list", {"page_size": 100})
        assert shown["arguments"] == {**arguments, "query": {"api_key": MASK, "fields": MASK}}, shown
        assert token not in json.dumps(shown) and token not in json.dumps(listed)
        async with browser(app, ws.host) as page:
            assert (await sign_in(page, ws.emails["owner"], next_path="/console/")).status_code == 303
            inbox = await page.get("/console/oversight/", params={"org": ws.org.id})
        assert inbox.status_code == 200 and request_id in inbox.text and "api_key" in inbox.text
        assert token not in inbox.text

        await ok(client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
        held = {"X-Prism-Oversight-Request": request_id}
        # What the reviewers saw is not what was approved: the approval is bound to the values as sent.
        masked = await post(client, ws, "integration_call/integrations/endpoint/call", shown["arguments"],
                            label="agent", headers=held)
        assert masked.status_code == 409 and masked.json()["error"] == "oversight_arguments_mismatch", masked.text
        approved = await post(client, ws, "integration_call/integrations/endpoint/call", arguments, label="agent",
                              headers=held)
        assert approved.status_code == 200 and approved.json()["data"]["ok"] is True, approved.text
        assert not service.invalid and service.arrived[-1].query == [("fields", "name")]  # the key arrived too

        # Nowhere kept in plaintext: the request, the ledger's entries, decisions, events, the call's log.
        assert await texts_holding(db, token) == []
    finally:
        await running.stop()
