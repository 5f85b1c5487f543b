"""A legacy SSE stream opened by an OAuth token that may act in several organizations: each message posted to it
acts in the organization its own POST chose (X-Organization-Context, else the grant's default) and is authorized
there, as every request of the streamable door is; the stream's organization lends it nothing and withholds
nothing. Only the tenant is part of what a stream is bound to (with the credential): a POST acting in another
tenant's organization is 404 session_not_found."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from sqlalchemy import select

from prism.identity.service import add_to_organization
from prism.kit.ids import stored_organization_id
from prism.models import Organization, User
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.oauth_support import bearer, browser, tokens_for
from tests.test_mcp_legacy_sse_refusals_and_shutdown import Stream
from tests.test_mcp_protocol import rpc

WHOAMI = rpc("tools/call", {"name": "prism_whoami", "arguments": {}}, request_id=1)


def _create_part() -> dict[str, Any]:
    """A write, each with its own SKU (SKUs are unique)."""
    return rpc("tools/call", {"name": "prism_entity_crud", "arguments": {
        "app": "spare_parts", "entity": "spare_part", "operation": "create",
        "arguments": {"sku": f"SKU-{uuid.uuid4().hex[:12]}", "name": "Bolt"}}}, request_id=2)


async def _join(db: Database, ws: Workspace, org: Organization, role: str) -> None:
    async with db.write() as s:
        user = (await s.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        await add_to_organization(s, user, org, role=role)


def _headers(token: str, host: str, organization: str | None) -> dict[str, str]:
    return {**bearer(token), "Host": host, **({"X-Organization-Context": organization} if organization else {})}


class OrgStream(Stream):
    """A legacy stream opened with an OAuth token, in the organization `organization` names."""

    def __init__(self, app: Any, ws: Workspace, token: str, host: str, organization: str | None) -> None:
        super().__init__(app, ws)
        self.headers = [(k.lower().encode(), v.encode()) for k, v in _headers(token, host, organization).items()]


async def _post(c: httpx.AsyncClient, endpoint: str, token: str, host: str, organization: str | None,
                message: dict[str, Any]) -> httpx.Response:
    return await c.post(endpoint, json=message, headers={**_headers(token, host, organization),
                                                         "Content-Type": "application/json"})


async def _result(stream: Stream) -> dict[str, Any]:
    """The next answer on the stream: the tool's envelope, and whether MCP marks it an error."""
    kind, data = await stream.event()
    assert kind == "message"
    result = json.loads(data)["result"]
    envelope: dict[str, Any] = json.loads(result["content"][0]["text"])
    return {**envelope, "is_error": result["isError"]}


async def _acting(c: httpx.AsyncClient, stream: Stream, endpoint: str, token: str, host: str,
                  organization: str | None) -> tuple[str, str, bool]:
    """Post whoami and a write acting in `organization`: (organization acted in, role there, write allowed)."""
    for message in (WHOAMI, _create_part()):
        posted = await _post(c, endpoint, token, host, organization, message)
        assert posted.status_code == 202, posted.text
    whoami, created = await _result(stream), await _result(stream)
    if created["is_error"]:
        assert created["error"] == "permission_denied", created
    org = whoami["data"]["organization"]
    return stored_organization_id(org["id"]) or "", org["role"], not created["is_error"]


async def test_a_message_acts_in_the_organization_its_own_post_chose_with_the_role_there(
        app: Any, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    second = await factory.second_org(ws, "Second org")
    await _join(db, ws, second, role="viewer")  # owner of "Main org", viewer of "Second org"
    async with browser(app, ws.host) as c:
        token = (await tokens_for(c, ws, organizations=[ws.org.id, second.id]))["access_token"]
        # Opened where the user may write, posted where they may only read: the stream lends no permission.
        async with OrgStream(app, ws, token, ws.host, ws.org.id) as in_main:
            _, endpoint = await in_main.event()
            main_stream_posting_in_second = await _acting(c, in_main, endpoint, token, ws.host, second.id)
            main_stream_posting_by_default = await _acting(c, in_main, endpoint, token, ws.host, None)
        # Opened where the user may only read, posted where they may write: nor does it withhold any.
        async with OrgStream(app, ws, token, ws.host, second.id) as in_second:
            _, endpoint = await in_second.event()
            second_stream_posting_in_main = await _acting(c, in_second, endpoint, token, ws.host, ws.org.id)
    assert main_stream_posting_in_second == (second.id, "viewer", False)
    assert main_stream_posting_by_default == (ws.org.id, "owner", True)  # the grant's default: "Main org"
    assert second_stream_posting_in_main == (ws.org.id, "owner", True)


async def test_a_stream_opens_no_way_into_an_organization_the_token_was_not_consented_for(
        app: Any, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    unconsented = await factory.second_org(ws, "Production")
    await _join(db, ws, unconsented, role="owner")  # a member, but the token was not consented for it
    async with browser(app, ws.host) as c:
        token = (await tokens_for(c, ws, organizations=[ws.org.id]))["access_token"]
        async with OrgStream(app, ws, token, ws.host, None) as stream:
            _, endpoint = await stream.event()
            refused = await _post(c, endpoint, token, ws.host, unconsented.id, _create_part())
            still_served = await _acting(c, stream, endpoint, token, ws.host, None)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["data"]["error"] == "organization_not_consented"
    assert still_served == (ws.org.id, "owner", True)  # nothing of the refused message reached the stream


async def test_a_platform_host_token_cannot_post_to_its_stream_acting_in_another_tenants_organization(
        app: Any, db: Database, factory: Factory) -> None:
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await _join(db, ws, other.org, role="owner")  # the user is a member in both tenants
    host = "localhost"
    async with browser(app, host) as c:
        token = (await tokens_for(c, ws, organizations=[ws.org.id, other.org.id]))["access_token"]
        for opened_in, posted_in in ((ws.org.id, other.org.id), (other.org.id, ws.org.id)):
            async with OrgStream(app, ws, token, host, opened_in) as stream:
                _, endpoint = await stream.event()
                across = await _post(c, endpoint, token, host, posted_in, _create_part())
                assert across.status_code == 404, across.text
                assert across.json()["error"]["data"]["error"] == "session_not_found"
                # The stream itself is intact and serves its own tenant's organization.
                assert (await _acting(c, stream, endpoint, token, host, opened_in))[:2] == (opened_in, "owner")


