"""A held webhook create or update keeps its arguments for the reviewers with the receiver URL's secrets withheld,
as an integration's URL is (docs/governance.md "Human oversight"): a key in its query. The approved
call, sent again with the real values, creates the webhook with them."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.factories import Factory
from tests.governance_support import governed_key, ok, post

REVIEWED = {"name": "reviewed-webhooks", "default": "allow",
            "oversight": ["config_manage/governance/webhook/create", "config_manage/governance/webhook/update"]}


async def test_a_held_webhook_call_shows_its_reviewers_the_url_without_its_key(hook_client: httpx.AsyncClient,
                                                                             factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, hook_client, ws, "agent", persona=REVIEWED)
    token = "s3cret" + uuid.uuid4().hex
    url = f"https://127.0.0.1:9/hook?token={token}&team=ops"
    path = "config_manage/governance/webhook/create"
    arguments = {"name": "siem", "url": url, "events": ["ticket.created"]}
    held = await post(hook_client, ws, path, arguments, label="agent")
    assert held.status_code == 202, held.text
    request_id = held.json()["details"]["oversight_request_id"]
    shown = await ok(hook_client, ws, "governance_review/governance/oversight_request/read", {"id": request_id})
    listed = await ok(hook_client, ws, "governance_review/governance/oversight_request/list", {"page_size": 100})
    assert token not in json.dumps(shown) and token not in json.dumps(listed), shown["arguments"]
    assert "127.0.0.1:9/hook" in shown["arguments"]["url"] and "team=" in shown["arguments"]["url"]
    await ok(hook_client, ws, "governance_review/governance/oversight_request/approve", {"id": request_id})
    approved = await post(hook_client, ws, path, arguments, label="agent",
                          headers={"X-Prism-Oversight-Request": request_id})
    assert approved.status_code == 200 and approved.json()["data"]["url"] == url, approved.text

    update = "config_manage/governance/webhook/update"
    changed = await post(hook_client, ws, update, {"id": approved.json()["data"]["id"], "url": url + "&x=1"},
                         label="agent")
    assert changed.status_code == 202, changed.text
    again = await ok(hook_client, ws, "governance_review/governance/oversight_request/read",
                     {"id": changed.json()["details"]["oversight_request_id"]})
    assert token not in json.dumps(again), again["arguments"]
