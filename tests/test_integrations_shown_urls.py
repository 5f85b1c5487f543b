"""Where an integration comes from, as each organization is shown it (docs/integrations.md, "What each
organization sees of an integration"): the deployment's integration is shared by every organization, and the
operator may have written a token into its URLs (`?token=...`, `user:password@`), so an organization sees only
its address; an organization sees its own integration's URLs with the credentials withheld (the userinfo, each
query value and the fragment: they are sealed at rest, prism.integrations.sealed_urls), which nobody sees."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from prism.config import Settings
from prism.integrations import service
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

SPEC_URL = "https://ops:spec-pass@specs.example.com/warehouse/openapi.json?token=spec-token#v2"
SERVER = "https://svc:server-pass@warehouse.example.com:8443/v2?key=server-key#top"
MCP_URL = "https://mcp:mcp-pass@tools.example.com/mcp?token=mcp-token"
SECRETS = ("spec-pass", "spec-token", "server-pass", "server-key", "mcp-pass", "mcp-token", "#v2", "#top")


def document() -> str:
    return json.dumps({
        "openapi": "3.0.3", "info": {"title": "Warehouse", "version": "1"}, "servers": [{"url": SERVER}],
        "paths": {"/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}}})


async def stored(db: Database, settings: Settings, *, owner: str | None, openapi: str, mcp: str) -> None:
    """As `prism integration import-openapi URL` and `add-mcp URL` store them (owner None), or an organization's
    import by URL and addMcp (the organization's id)."""
    compiled = service.compile_openapi(document())
    tool = {"entity": "tool", "operation": "look", "description": "look", "method": "MCP", "read_only": True,
            "destructive": False, "cost": 1, "schema": {"type": "object"}, "permission_verb": "view"}
    async with db.write() as session:
        await service.store_openapi(session, settings, openapi, compiled, source=SPEC_URL,
                                    owner_organization_id=owner, installed=frozenset())
        await service.add_mcp(session, settings, mcp, MCP_URL, [tool], owner_organization_id=owner,
                              installed=frozenset())


async def shown(client: httpx.AsyncClient, ws: Workspace, name: str) -> list[dict[str, Any]]:
    """The integration as the organization's list and read show it (the console shows these answers)."""
    listed = await ok(client, ws, "config_manage/integrations/integration/list", {"page_size": 100})
    read = await ok(client, ws, "config_manage/integrations/integration/read", {"name": name})
    return [*(i for i in listed["items"] if i["name"] == name), read]


async def test_an_organization_sees_only_the_address_of_the_deployments_integration(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings) -> None:
    a, b = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    openapi, mcp = "dep_" + uuid.uuid4().hex[:8], "depm_" + uuid.uuid4().hex[:8]
    await stored(db, settings, owner=None, openapi=openapi, mcp=mcp)

    for ws in (a, b):  # two tenants, each shown the same address
        for record in await shown(client, ws, openapi):
            assert record["source"] == "https://specs.example.com/warehouse/openapi.json"
            assert record["default_server"] == "https://warehouse.example.com:8443/v2"
        for record in await shown(client, ws, mcp):
            assert record["source"] == record["default_server"] == "https://tools.example.com/mcp"
            assert record["title"] == "https://tools.example.com/mcp"
        seen = json.dumps([await shown(client, ws, openapi), await shown(client, ws, mcp)])
        assert not any(secret in seen for secret in SECRETS), seen
    # The MCP server's description, which introspection shows every organization connected to it, too.
    async with db.read() as session:
        described = (await service.usable_named(session, a.org.id, mcp)).description
    assert described == "Tools of the MCP server at https://tools.example.com/mcp."


async def test_an_organization_sees_its_own_integrations_urls_without_credentials_and_the_operator_too(
        client: httpx.AsyncClient, factory: Factory, db: Database, settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    openapi, mcp = "own_" + uuid.uuid4().hex[:8], "ownm_" + uuid.uuid4().hex[:8]
    await stored(db, settings, owner=ws.org.id, openapi=openapi, mcp=mcp)

    for record in await shown(client, ws, openapi):
        assert record["source"] == "https://specs.example.com/warehouse/openapi.json?token=********#********"
        assert record["default_server"] == "https://warehouse.example.com:8443/v2?key=********#********"
    for record in await shown(client, ws, mcp):
        assert record["source"] == record["default_server"] == "https://tools.example.com/mcp?token=********"
        assert not any(secret in json.dumps(record) for secret in SECRETS), record
    # The operator's view (`prism integration list --json`) keeps every URL, never a credential either.
    async with db.read() as session:
        for name in (openapi, mcp):
            operator = service.describe(await service.usable_named(session, ws.org.id, name), seen_by=None)
            assert not any(secret in json.dumps(operator) for secret in SECRETS) and "token=" in operator["source"]
