"""One public id per organization: SPEC's `org_<hex>` (what webhook events carry) in every answer of every door
that names one, and either form (or the slug, where slugs are taken) accepted on input."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from prism.events.outbox import envelope, new_event_id
from prism.kit.ids import public_organization_id, stored_organization_id
from prism.kit.timeutil import utcnow
from prism.storage import Database
from tests.factories import PASSWORD, Factory, Workspace
from tests.test_mcp_protocol import call, headers_for, initialize, rpc

PUBLIC = re.compile(r"^org_[0-9a-f]{32}$")
WHOAMI = {"app": "core", "entity": "caller", "operation": "whoami"}


@pytest.fixture(scope="module")
async def ws(db: Database) -> Workspace:
    return await Factory(db).workspace(roles=("owner",))


async def _whoami_everywhere(client: httpx.AsyncClient, ws: Workspace) -> dict[str, Any]:
    h = ws.headers()
    answers = {
        "me": (await client.get("/api/v1/dev/me/", headers=h)).json(),
        "sandbox call": (await client.post("/api/v1/dev/call/", headers=h, json={"name": "prism_whoami"})).json(),
        "legacy tool": (await client.post("/api/mcp/tools/prism_whoami/", headers=h, json={})).json()["data"],
        "canonical": (await client.post("/api/mcp/tools/prism_report_query/", headers=h,
                                        json=WHOAMI)).json()["data"],
        "coordinate path": (await client.post("/prism/report_query/core/caller/whoami", headers=h)).json()["data"],
    }
    headers = headers_for(ws, "owner")
    session = await initialize(client, headers)
    result = (await call(client, headers, session, rpc("tools/call", {"name": "prism_whoami", "arguments": {}})))
    answers["mcp"] = json.loads(result.json()["result"]["content"][0]["text"])["data"]
    return answers


async def test_every_door_shows_the_organization_as_webhook_events_do(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    event = envelope(new_event_id("ticket.created"), "ticket.created", utcnow(), ws.org.id, {})
    assert PUBLIC.match(event["organization_id"])
    for door, whoami in (await _whoami_everywhere(client, ws)).items():
        assert whoami["organization"]["id"] == event["organization_id"], door


async def test_key_registration_answers_the_public_id_and_takes_either_form_or_the_slug(
        client: httpx.AsyncClient, ws: Workspace) -> None:
    url, email = "/api/mcp/api-keys/register/", ws.emails["owner"]
    public = public_organization_id(ws.org.id)
    for named in (public, ws.org.id, ws.org.id.replace("-", "").upper(), ws.org.slug):
        r = await client.post(url, headers={"Host": ws.host},
                              json={"email": email, "password": PASSWORD, "organization": named})
        assert r.status_code == 201, (named, r.text)
        assert r.json()["organization"] == public, named
    r = await client.post(url, headers={"Host": ws.host},
                          json={"email": email, "password": PASSWORD, "organization": "org_" + "0" * 32})
    assert r.status_code == 404 and r.json()["error"] == "organization_not_found", r.text


def test_both_forms_name_the_same_stored_organization() -> None:
    stored = "0b9c9f4e-53c4-4f0e-9d6e-3c1c6b0e8a11"
    public = public_organization_id(stored)
    assert public == "org_0b9c9f4e53c44f0e9d6e3c1c6b0e8a11"
    assert {stored_organization_id(v) for v in (public, stored, stored.upper(), f"{{{stored}}}")} == {stored}
    assert stored_organization_id("acme") is None and stored_organization_id("org_nothex") is None
