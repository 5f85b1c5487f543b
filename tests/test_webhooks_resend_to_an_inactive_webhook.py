"""Inactive webhooks never deliver (SPEC.md), resends included, as test events are: a resend to a switched-off
webhook is refused on every door it is reachable from (409 `webhook_inactive`: the REST API, the canonical tool
door, MCP, the console and the admin page), and nothing is queued, rather than accepted (202) and made FAILED
unsent when a worker reaches it. Switched back on, the same delivery is resent and reaches the receiver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from starlette.applications import Starlette

from prism.events.outbox import emit
from prism.storage import Database
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.governance_support import post
from tests.oauth_support import browser, field, sign_in
from tests.test_mcp_protocol import call, headers_for, initialize, rpc, tool_text
from tests.webhooks_fixtures import BASE, DECISION_DATA, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Receiver

DELIVERY = "config_manage/governance/webhook_delivery"
EVENT = "governance.decision.block"


async def _mcp_resend(client: httpx.AsyncClient, ws: Workspace, arguments: dict[str, str]) -> tuple[bool, Any]:
    headers = headers_for(ws)
    session = await initialize(client, headers)
    answer = await call(client, headers, session, rpc("tools/call", {"name": "prism_config_manage", "arguments": {
        "app": "governance", "entity": "webhook_delivery", "operation": "resend", "arguments": arguments}}))
    return tool_text(answer)


async def _page_resends(app: Starlette, ws: Workspace, page: str, action: str, form: dict[str, str]) -> httpx.Response:
    """The person signed in, the page's Resend form posted with the session's CSRF token."""
    async with browser(app, ws.host) as c:
        assert (await sign_in(c, ws.emails["owner"], next_path=page)).status_code == 303
        shown = await c.get(page)
        assert shown.status_code == 200, shown.text[-600:]
        return await c.post(action, data={"csrf_token": field(shown.text, "csrf_token"), **form})


async def test_a_resend_to_an_inactive_webhook_is_refused_on_every_door(
        hook_app: Starlette, hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory,
        receiver: Receiver, make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    hook = await create_hook(hook_client, ws, receiver.url(path), events=[EVENT])
    # An event queued while the webhook was on, switched off before it was sent: the worker makes it FAILED
    # unsent, and docs/webhooks.md says to resend it once the webhook is on again.
    async with hook_db.write() as session:
        await emit(session, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type=EVENT, data=DECISION_DATA)
    switched = await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": False}, headers=ws.headers())
    assert switched.status_code == 200, switched.text
    await make_worker().run_once()
    [unsent] = await deliveries_of(hook_client, ws, hook["id"])
    assert unsent["status"] == "failed" and unsent["error_message"] == "webhook is inactive: not sent", unsent
    arguments = {"webhook_id": hook["id"], "id": unsent["id"]}

    rest = await hook_client.post(f"{BASE}{hook['id']}/deliveries/{unsent['id']}/resend/", headers=ws.headers())
    assert rest.status_code == 409, rest.text
    assert set(rest.json()) == {"error", "message"} and rest.json()["error"] == "webhook_inactive", rest.text
    assert "is_active" in rest.json()["message"], rest.text
    canonical = await post(hook_client, ws, f"{DELIVERY}/resend", arguments)
    assert canonical.status_code == 409 and canonical.json()["error"] == "webhook_inactive", canonical.text
    is_error, body = await _mcp_resend(hook_client, ws, arguments)
    assert is_error and body["error"] == "webhook_inactive", body
    console_page = f"/console/webhooks/{hook['id']}/?org={ws.org.id}"
    console = await _page_resends(hook_app, ws, console_page,
                                  f"/console/webhooks/{hook['id']}/deliveries/{unsent['id']}/resend/?org={ws.org.id}",
                                  {})
    assert console.status_code == 409 and "(webhook_inactive)" in console.text, console.text[-600:]
    admin = await _page_resends(hook_app, ws, "/admin/integrations/webhooks/",
                                f"/admin/integrations/webhooks/{hook['id']}/deliveries/{unsent['id']}/resend/",
                                {"organization": ws.org.id})
    assert admin.status_code == 409 and "is_active" in admin.text, admin.text[-600:]
    assert [d["id"] for d in await deliveries_of(hook_client, ws, hook["id"])] == [unsent["id"]]  # nothing queued

    # Switched back on (as the refusal says), the same delivery is resent and delivered.
    on = await hook_client.patch(f"{BASE}{hook['id']}/", json={"is_active": True}, headers=ws.headers())
    assert on.status_code == 200, on.text
    resent = await hook_client.post(f"{BASE}{hook['id']}/deliveries/{unsent['id']}/resend/", headers=ws.headers())
    assert resent.status_code == 202 and resent.json()["event_id"] == unsent["event_id"], resent.text
    await make_worker().run_once()
    assert len(receiver.at(path)) == 1
    done = {d["id"]: d for d in await deliveries_of(hook_client, ws, hook["id"])}
    assert done[resent.json()["id"]]["status"] == "success", done
