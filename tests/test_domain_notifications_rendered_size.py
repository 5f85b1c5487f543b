"""Notification templates: what a rendered body may become."""

from __future__ import annotations

import httpx

from tests.domain_support import Caller
from tests.factories import Factory

MAX_BODY = 50_000  # notification_send's body ceiling (Send.body, TemplateCreate.body)


async def test_a_rendered_template_body_keeps_the_notification_body_ceiling(client: httpx.AsyncClient,
                                                                           factory: Factory) -> None:
    # A 50,000-character template of 25,000 "$v" placeholders and one 100-character value: a ~60 KB request
    # renders a 2,500,000-character notification (with a 900 KB value: 22.5 GB, in the server's memory).
    ws = await factory.workspace(roles=("owner", "member"))
    c = Caller(client, ws)
    template = await c.create("notifications", "template", {"name": "amp", "subject": "s", "body": "$v" * 25_000})
    status, body = await c.raw("notification_send", "notifications", "notification", "sendTemplate", {
        "email": ws.emails["member"], "template_id": template["id"], "variables": {"v": "x" * 100}})
    if status == 200:
        assert len(body["data"]["body"]) <= MAX_BODY, f"rendered body of {len(body['data']['body'])} characters"
    else:
        assert (status, body["error"]) == (400, "invalid_arguments"), body
