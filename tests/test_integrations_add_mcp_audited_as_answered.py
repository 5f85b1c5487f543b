"""`addMcp` reads the upstream's tools before its ledger unit, and stores them (with the connection) in the call's
own transaction: its one audit entry says what its answer says. An upstream that cannot be read refuses the call,
audited as that refusal, and nothing is stored; one that can be read is added, audited as allowed. A real FastMCP
upstream on loopback, behind its key."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlalchemy import func, select

from prism.integrations.models import IntegrationApp, IntegrationConnection
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import entries, post
from tests.integrations_mcp_upstream import UPSTREAM_KEY, RunningMcp
from tests.integrations_upstream import upstream_tls_fixture  # noqa: F401 -- fixture: a loopback upstream's TLS
from tests.webhooks_receiver import TlsFiles

ADD = "config_manage/integrations/integration/addMcp"

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


async def test_an_upstream_that_cannot_be_read_refuses_the_call_in_its_audit_entry_too(
        client: httpx.AsyncClient, factory: Factory, db: Database, tls: TlsFiles) -> None:
    ws = await factory.workspace(roles=("owner",))
    name = "mcp_" + uuid.uuid4().hex[:8]
    upstream = await RunningMcp(tls).start()
    try:
        arguments = {"name": name, "url": upstream.url, "auth_kind": "api_key", "header": "X-Upstream-Key"}
        refused = await post(client, ws, ADD, {**arguments, "secret": "not-the-key"})
        assert refused.status_code >= 400, refused.text
        error = refused.json()["error"]
        async with db.read() as session:
            stored = (await session.execute(select(func.count()).select_from(IntegrationApp).where(
                IntegrationApp.name == name))).scalar_one()
            connected = (await session.execute(select(func.count()).select_from(IntegrationConnection).where(
                IntegrationConnection.organization_id == ws.org.id))).scalar_one()
        assert (stored, connected) == (0, 0)

        added = await post(client, ws, ADD, {**arguments, "secret": UPSTREAM_KEY})
        assert added.status_code == 200, added.text
        assert "tool/getForecast" in added.json()["data"]["added"]
        forecast = await post(client, ws, f"integration_call/{name}/tool/getForecast", {"city": "Oslo"})
        assert forecast.status_code == 200, forecast.text

        audited = [(e.outcome, e.error_code, e.detail["status"]) for e in await entries(db, ws.org.id)
                   if e.coordinate == ADD]
        assert audited == [("refused", error, refused.status_code),
                           ("allowed", None, 200)], audited
    finally:
        await upstream.stop()
