"""notifications: sent to members or channels (never outside the organization), templates, read state, inbox."""

from __future__ import annotations

import httpx

from tests.domain_support import Caller
from tests.factories import Factory


async def test_a_member_receives_a_notification_reads_it_and_sees_the_inbox(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    owner, member = Caller(client, ws), Caller(client, ws, "member")
    sent = await owner.ok("notification_send", "notifications", "notification", "send", {
        "email": ws.emails["member"].upper(), "subject": "Invoice overdue", "body": "NB-1001 is 10 days late",
        "priority": "high"})
    assert sent["recipient_email"] == ws.emails["member"] and sent["status"] == "unread"
    inbox = await member.ok("report_query", "notifications", "notification", "inbox", {})
    assert (inbox["unread"], inbox["by_priority"]) == (1, {"high": 1})
    assert inbox["latest"][0]["id"] == sent["id"]
    assert (await owner.ok("report_query", "notifications", "notification", "inbox", {}))["unread"] == 0
    read = await member.ok("workflow_action", "notifications", "notification", "markRead", {"id": sent["id"]})
    assert read["status"] == "read" and read["read_at"]
    await member.ok("workflow_action", "notifications", "notification", "archive", {"id": sent["id"]})
    await member.refused(409, "invalid_transition", "workflow_action", "notifications", "notification", "markUnread",
                         {"id": sent["id"]})
    await owner.ok("notification_send", "notifications", "notification", "send",
                   {"email": ws.emails["member"], "subject": "One"})
    await owner.ok("notification_send", "notifications", "notification", "send",
                   {"email": ws.emails["member"], "subject": "Two"})
    assert (await member.ok("workflow_action", "notifications", "notification", "markAllRead", {})) == {
        "marked_read": 2}
    by_role = await owner.ok("notification_send", "notifications", "notification", "sendToRole",
                             {"role": "member", "subject": "Stocktake Friday"})
    assert by_role["sent"] == 1


async def test_templates_render_and_channels_take_posts(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    channel = await c.create("notifications", "channel", {"name": "#ops-alerts", "kind": "chat"})
    template = await c.create("notifications", "template", {
        "name": "low-stock", "subject": "Low stock: $sku", "body": "Only $quantity left of ${sku}."})
    posted = await c.ok("notification_send", "notifications", "notification", "sendTemplate", {
        "channel_id": channel["id"], "template_id": template["id"], "variables": {"sku": "BRG-1", "quantity": "2"}})
    assert (posted["subject"], posted["body"], posted["channel_id"]) == (
        "Low stock: BRG-1", "Only 2 left of BRG-1.", channel["id"])
    message = await c.refused(400, "invalid_arguments", "notification_send", "notifications", "notification",
                              "sendTemplate", {"channel_id": channel["id"], "template_id": template["id"],
                                               "variables": {"sku": "X"}})
    assert "quantity" in message
    await c.refused(400, "invalid_arguments", "notification_send", "notifications", "notification", "send",
                    {"subject": "nobody"})
    await c.refused(400, "invalid_arguments", "entity_crud", "notifications", "template", "create",
                    {"name": "bad", "subject": "Cost $", "body": "x"})
    await c.ok("entity_crud", "notifications", "channel", "update", {"id": channel["id"], "status": "archived"})
    await c.refused(409, "conflict", "notification_send", "notifications", "notification", "send",
                    {"channel_id": channel["id"], "subject": "late"})


async def test_notifications_never_reach_or_reveal_another_organization(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine_ws = await factory.workspace(roles=("owner",))
    theirs_ws = await factory.workspace(roles=("owner",))
    mine, theirs = Caller(client, mine_ws), Caller(client, theirs_ws)
    await mine.refused(404, "not_found", "notification_send", "notifications", "notification", "send",
                       {"email": theirs_ws.emails["owner"], "subject": "phish"})
    channel = await theirs.create("notifications", "channel", {"name": "#private"})
    await mine.refused(404, "not_found", "notification_send", "notifications", "notification", "send",
                       {"channel_id": channel["id"], "subject": "spam"})
    note = await theirs.ok("notification_send", "notifications", "notification", "send",
                           {"channel_id": channel["id"], "subject": "internal"})
    await mine.refused(404, "not_found", "workflow_action", "notifications", "notification", "markRead",
                       {"id": note["id"]})
    await mine.refused(404, "not_found", "entity_crud", "notifications", "notification", "delete", {"id": note["id"]})
    assert (await mine.ok("entity_crud", "notifications", "notification", "count", {}))["count"] == 0
    assert (await theirs.read("notifications", "notification", note["id"]))["status"] == "unread"
