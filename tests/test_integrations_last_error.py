"""What an integration's `last_error` (and a refused add or refresh) shows, and to whom (docs/integrations.md,
"What `last_error` shows to whom"): an upstream's URL may carry a token in its query string, the upstream may
echo the credential it was sent, and its address is the deployment's network. Every organization that may
connect to the deployment's integration is shown a reason in Prism's words; an organization its own
integration's failure without credentials; another organization nothing of it. Real upstreams on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid

import httpx
import pytest
from sqlalchemy import select

from prism.config import Settings
from prism.integrations import service
from prism.integrations.models import IntegrationApp, IntegrationCall
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.integrations_mcp_upstream import (
    UPSTREAM_KEY,
    RunningMcp,
    ScriptedMcp,
    scripted_fixture,  # noqa: F401 -- fixture: `scripted`
)
from tests.integrations_upstream import (  # noqa: F401 -- fixture: a loopback upstream's TLS (this module's `tls`)
    upstream_tls_fixture,
)
from tests.processes import CliResult, cli_json, run_cli
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

READ = "config_manage/integrations/integration/read"
LIST = "config_manage/integrations/integration/list"
TOKEN = "qs-t0ken-" + "z" * 8  # written into the upstream's URL by whoever added it
KEY = "conn-k3y-" + "q" * 12  # the connection's credential


async def test_an_organizations_own_integration_keeps_why_its_list_was_not_read_without_its_credentials(
        client: httpx.AsyncClient, factory: Factory, db: Database, scripted: ScriptedMcp) -> None:
    """The upstream refuses the announced list with a text that echoes the URL (its token) and the key: the owner
    is shown why, without either; the database holds neither; another organization does not see the
    integration at all."""
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    scripted.tools = [{"name": "announce", "inputSchema": {"type": "object"}},
                      {"name": "warm", "inputSchema": {"type": "object"}}]
    scripted.announcing = {"announce"}
    await ok(client, a, "config_manage/integrations/integration/addMcp", {
        "name": name, "url": f"{scripted.url}?token={TOKEN}", "transport": "streamable_http",
        "auth_kind": "api_key", "header": "X-Upstream-Key", "secret": KEY})
    # The session's first call has the MCP client list the tools itself; only Prism's own reading is refused.
    assert (await post(client, a, f"integration_call/{name}/tool/warm", {})).status_code == 200
    scripted.refusing_lists = True
    announced = await post(client, a, f"integration_call/{name}/tool/announce", {})
    assert announced.status_code == 200, announced.text[:300]

    seen = await ok(client, a, READ, {"name": name})
    assert seen["status"] == "stale" and "gateway refused" in seen["last_error"], seen
    assert f"https://127.0.0.1:{scripted.port}/mcp (" in seen["last_error"]  # its own upstream's address
    listed = [i for i in (await ok(client, a, LIST, {"page_size": 100}))["items"] if i["name"] == name]
    assert listed[0]["last_error"] == seen["last_error"]
    assert TOKEN not in seen["last_error"] and KEY not in seen["last_error"], seen  # its own URLs show the token
    async with db.read() as session:
        kept = (await session.execute(select(IntegrationApp.last_error).where(IntegrationApp.name == name))).scalar()
        recorded = (await session.execute(select(IntegrationCall.error).where(
            IntegrationCall.organization_id == a.org.id, IntegrationCall.path == "announce"))).scalar()
    assert kept and "gateway refused" in kept and recorded and "gateway refused" in recorded
    assert not any(secret in text for secret in (TOKEN, KEY) for text in (kept, recorded)), (kept, recorded)

    hidden = await post(client, b, READ, {"name": name})
    assert hidden.status_code == 404 and hidden.json()["error"] == "not_found"
    assert name not in json.dumps(await ok(client, b, LIST, {"page_size": 100}))


async def test_a_refused_add_shows_its_owner_the_upstreams_answer_without_the_token_in_its_url(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    """The legacy SSE transport refuses a wrong key with HTTP 401, whose text names the URL it was sent to."""
    running = await RunningMcp(tls, transport="sse").start()
    ws = await factory.workspace(roles=("owner",))
    try:
        refused = await post(client, ws, "config_manage/integrations/integration/addMcp", {
            "name": "mcp_" + uuid.uuid4().hex[:8], "url": f"{running.url}?token={TOKEN}", "transport": "sse",
            "auth_kind": "api_key", "header": "X-Upstream-Key", "secret": KEY})
    finally:
        await running.stop()
    assert refused.status_code == 502 and refused.json()["error"] == "upstream_error", refused.text[:300]
    assert refused.json()["details"]["upstream_status"] == 401
    assert "401" in refused.json()["message"] and f"127.0.0.1:{running.port}/mcp" in refused.json()["message"]
    assert TOKEN not in refused.text and KEY not in refused.text

    with socket.socket() as closed:  # a port nothing listens on: the description cannot be fetched
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    unfetched = await post(client, ws, "config_manage/integrations/integration/importOpenapi", {
        "name": "oas_" + uuid.uuid4().hex[:8], "url": f"https://127.0.0.1:{port}/openapi.json?token={TOKEN}"})
    assert unfetched.status_code == 502 and unfetched.json()["error"] == "upstream_unreachable", unfetched.text
    assert TOKEN not in unfetched.text


async def test_every_organization_is_shown_why_a_refresh_of_the_deployments_integration_failed_in_prisms_words(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings, tls: TlsFiles) -> None:
    """The operator's refresh is refused (HTTP 401), then finds the upstream gone: the operator's command says so
    without the URL's token; every organization (two tenants, connected or not) is shown the reason only — no
    token, no address of the deployment's network, nothing the upstream said."""
    running = await RunningMcp(tls, transport="sse").start()
    name = "mcp_" + uuid.uuid4().hex[:8]
    outbound = {"PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
                "PRISM_WEBHOOK_CA_BUNDLE": settings.webhook_ca_bundle or ""}
    key_options = ("--auth", "api_key", "--header", "X-Upstream-Key")

    def refresh(secret: str) -> CliResult:
        return run_cli("integration", "refresh", name, *key_options, "--json", database_url=settings.database_url,
                       **outbound, PRISM_CONNECTION_SECRET=secret)

    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    try:
        added = await asyncio.to_thread(cli_json, "integration", "add-mcp", f"{running.url}?token={TOKEN}", "--app",
                                        name, "--transport", "sse", *key_options,
                                        database_url=settings.database_url, **outbound,
                                        PRISM_CONNECTION_SECRET=UPSTREAM_KEY)
        assert added["handlers"] == 6
        await ok(client, a, "config_manage/integrations/connection/set", {
            "name": name, "base_url": running.url, "auth_kind": "api_key", "header": "X-Upstream-Key",
            "secret": UPSTREAM_KEY})
        wrong = await asyncio.to_thread(refresh, KEY)
        assert wrong.returncode == 1 and wrong.error["error"] == "upstream_error"
        assert "401" in wrong.stderr and TOKEN not in wrong.stderr and KEY not in wrong.stderr
        for ws in (a, b):
            seen = await ok(client, ws, READ, {"name": name})
            assert seen["last_error"] == ("the tool list could not be read again: the upstream answered HTTP 401; "
                                          "revision 1 still serves"), seen
    finally:
        await running.stop()
    gone = await asyncio.to_thread(refresh, UPSTREAM_KEY)
    assert gone.returncode == 1 and gone.error["error"] == "upstream_unreachable"
    assert TOKEN not in gone.stderr

    expected = "the tool list could not be read again: the upstream could not be reached; revision 1 still serves"
    for ws in (a, b):
        seen = await ok(client, ws, READ, {"name": name})
        listed = [i for i in (await ok(client, ws, LIST, {"page_size": 100}))["items"] if i["name"] == name]
        assert seen["last_error"] == listed[0]["last_error"] == expected and seen["last_error_at"] is not None
        assert seen["status"] == "ok" and seen["revision"] == 1  # the stored list still serves
        assert TOKEN not in json.dumps([seen, listed]) and "127.0.0.1" not in seen["last_error"]
    operator = await asyncio.to_thread(cli_json, "integration", "list", database_url=settings.database_url)
    assert [i["last_error"] for i in operator["integrations"] if i["name"] == name] == [expected]
    async with db.read() as session:
        assert (await service.usable_named(session, a.org.id, name)).last_error == expected
