"""A key written into a connection's or an endpoint's base URL (`?api_key=...`) is kept as a connection's secret
is: an upstream that echoes the URL it was asked for (a gateway's error page, a debugging endpoint) does not hand
it to the caller — here a `member`, who may not even read the connection. Withheld from an OpenAPI operation's
answer and from the excerpt of a refused one, from an upstream MCP tool's result, and from an endpoint call's
answer. Real HTTPS upstreams on loopback; the suite's engine."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import ok, post
from tests.integrations_mcp_upstream import (
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS
    RunningService,
    Scripted,
    SpecService,
    upstream_tls_fixture,
)
from tests.test_integrations_url_secrets import ITEMS
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


def _key() -> str:
    return "urlkey" + uuid.uuid4().hex  # one per run: the suite's database is shared


@pytest.fixture
async def service(tls: TlsFiles) -> AsyncIterator[SpecService]:
    running = RunningService(SpecService(ITEMS, base_path="/v2"), tls)
    started = await running.start()
    yield started
    await running.stop()


@pytest.mark.parametrize("status", [200, 404])
async def test_an_openapi_answer_echoing_the_base_urls_key_withholds_it(
        client: httpx.AsyncClient, factory: Factory, service: SpecService, status: int) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    key, name = _key(), "echo_" + uuid.uuid4().hex[:8]
    service.required_query["api_key"] = key  # refused (400) unless the key is sent
    await ok(client, ws, "config_manage/integrations/integration/importOpenapi", {"name": name, "spec": ITEMS})
    await ok(client, ws, "config_manage/integrations/connection/set",
             {"name": name, "base_url": f"{service.url()}?api_key={key}"})
    # As sent, percent-encoded and as a JSON encoder escapes it: each form of the key.
    echo = {"requested": f"/v2/items/7?api_key={key}", "again": key, "query": f"api_key%3D{key}"}
    service.script("getItem", Scripted(status, echo))

    called = await post(client, ws, f"integration_call/{name}/items/getItem", {"itemId": 7}, label="member")

    assert not service.invalid and service.arrived  # the key went to the upstream...
    assert key not in called.text, called.text  # ...and did not come back to the caller
    if status == 200:
        assert called.json()["data"]["body"] == {"requested": "/v2/items/7?********", "again": "********",
                                                 "query": "********"}
    else:
        assert called.status_code == 502 and called.json()["error"] == "upstream_error", called.text
        assert "/v2/items/7?********" in called.json()["details"]["upstream_body"]


async def test_an_mcp_tools_result_echoing_the_urls_key_withholds_it(
        client: httpx.AsyncClient, factory: Factory, scripted: ScriptedMcp) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    key, name = _key(), "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = [{"name": "where", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]
    echoed = f"{scripted.url}?api_key={key}"
    scripted.answers["where"] = {"content": [{"type": "text", "text": f"you asked {echoed}"}],
                                 "structuredContent": {"url": echoed}}
    await ok(client, ws, "config_manage/integrations/integration/addMcp",
             {"name": name, "url": f"{scripted.url}?api_key={key}", "transport": "streamable_http"})

    called = await ok(client, ws, f"integration_call/{name}/tool/where", {}, label="member")

    assert scripted.calls == ["where"] and key not in json.dumps(called), called
    assert called["structuredContent"] == {"url": f"{scripted.url}?********"}


async def test_an_endpoint_calls_answer_echoing_the_base_urls_key_withholds_it(
        client: httpx.AsyncClient, factory: Factory, service: SpecService) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    key = _key()
    service.required_query["api_key"] = key
    made = await ok(client, ws, "entity_crud/integrations/endpoint/create",
                    {"name": "echo", "base_url": f"{service.url()}?api_key={key}", "default_method": "GET"})
    service.script("getItem", Scripted(200, {"requested": f"/v2/items/7?api_key={key}"}))

    called = await ok(client, ws, "integration_call/integrations/endpoint/call",
                      {"id": made["id"], "path": "/items/7"}, label="member")

    assert not service.invalid and service.arrived
    assert called["body"] == {"requested": "/v2/items/7?********"}, called
