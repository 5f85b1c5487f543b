"""Webhook management API: create/list/read/patch/delete, validation, secrets, organization scoping."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from prism.storage import Database
from prism.webhooks.models import Webhook
from tests.factories import Factory
from tests.webhooks_fixtures import BASE, create_hook
from tests.webhooks_receiver import Receiver

URL = "https://127.0.0.1:9/hook"


async def test_create_returns_the_secret_once_and_reads_never_show_it(
        hook_client: httpx.AsyncClient, factory: Factory, hook_db: Database) -> None:
    ws = await factory.workspace()
    created = await create_hook(hook_client, ws, URL, events=["governance.decision.block"],
                                custom_headers={"Authorization": "Bearer receiver-token"})
    assert created["id"].startswith("whk_")
    assert created["secret"].startswith("whk_secret_")
    assert created["is_active"] is True
    assert (created["max_retries"], created["retry_delay_seconds"], created["timeout_seconds"]) == (4, 60, 30)
    assert created["custom_headers"] == {"Authorization": "********"}
    read = (await hook_client.get(f"{BASE}{created['id']}/", headers=ws.headers())).json()
    listed = (await hook_client.get(BASE, headers=ws.headers())).json()
    for shown in (read, listed):
        assert created["secret"] not in str(shown) and "receiver-token" not in str(shown)
    assert listed["count"] == 1 and listed["results"][0]["id"] == created["id"]
    async with hook_db.read() as s:
        row = (await s.execute(select(Webhook).where(Webhook.id == created["id"]))).scalar_one()
    # Sealed at rest: neither the secret nor the custom header value is in the database in plaintext.
    assert created["secret"] not in row.sealed and "receiver-token" not in row.sealed


async def test_list_filters_by_active_flag_and_name_and_pages(hook_client: httpx.AsyncClient,
                                                              factory: Factory) -> None:
    ws = await factory.workspace()
    ids = [(await create_hook(hook_client, ws, URL, name=f"SIEM {i}"))["id"] for i in range(3)]
    await create_hook(hook_client, ws, URL, name="Ticketing")
    await hook_client.patch(f"{BASE}{ids[0]}/", json={"is_active": False}, headers=ws.headers())
    by_name = (await hook_client.get(BASE, params={"name": "siem"}, headers=ws.headers())).json()
    assert by_name["count"] == 3
    inactive = (await hook_client.get(BASE, params={"is_active": "false"}, headers=ws.headers())).json()
    assert [w["id"] for w in inactive["results"]] == [ids[0]]
    pages = [(await hook_client.get(BASE, params={"page": p, "page_size": 2}, headers=ws.headers())).json()
             for p in (1, 2)]
    assert pages[0]["count"] == 4 and len(pages[0]["results"]) == 2 and len(pages[1]["results"]) == 2
    assert not {w["id"] for w in pages[0]["results"]} & {w["id"] for w in pages[1]["results"]}
    too_big = await hook_client.get(BASE, params={"page_size": 101}, headers=ws.headers())
    assert too_big.status_code == 400 and too_big.json()["details"]["errors"][0]["field"] == "page_size"


async def test_patch_changes_any_subset_and_replaces_the_secret(hook_client: httpx.AsyncClient,
                                                                factory: Factory) -> None:
    ws = await factory.workspace()
    created = await create_hook(hook_client, ws, URL)
    new_secret = "whk_secret_" + "k" * 32
    response = await hook_client.patch(f"{BASE}{created['id']}/", headers=ws.headers(), json={
        "name": "Renamed", "secret": new_secret, "max_retries": 0, "filters": {"risk_levels": ["high"]}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["name"] == "Renamed" and body["max_retries"] == 0 and body["filters"] == {"risk_levels": ["high"]}
    assert body["url"] == URL and "secret" not in body
    bad = await hook_client.patch(f"{BASE}{created['id']}/", json={"secret": "short"}, headers=ws.headers())
    assert bad.status_code == 400 and bad.json()["details"]["errors"][0]["field"] == "secret"


async def test_delete_answers_204_and_the_webhook_is_gone(hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    created = await create_hook(hook_client, ws, URL)
    assert (await hook_client.delete(f"{BASE}{created['id']}/", headers=ws.headers())).status_code == 204
    assert (await hook_client.get(f"{BASE}{created['id']}/", headers=ws.headers())).status_code == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"url": URL}, "name"),
    ({"name": "x" * 256, "url": URL}, "name"),
    ({"name": "n", "url": "http://example.com/hook"}, "url"),
    ({"name": "n"}, "url"),
    ({"name": "n", "url": URL, "events": ["governance.decision.nope"]}, "events"),
    ({"name": "n", "url": URL, "filters": {"tenant_ids": ["a"]}}, "filters"),
    ({"name": "n", "url": URL, "filters": {"risk_levels": "high"}}, "filters"),
    ({"name": "n", "url": URL, "custom_headers": {"X-Token": "a\r\nInjected: yes"}}, "custom_headers"),
    ({"name": "n", "url": URL, "custom_headers": {"X-Governance-Signature": "forged"}}, "custom_headers"),
    ({"name": "n", "url": URL, "custom_headers": {"Content-Type": "text/plain"}}, "custom_headers"),
    ({"name": "n", "url": URL, "custom_headers": {"Host": "evil.example"}}, "custom_headers"),
    ({"name": "n", "url": URL, "custom_headers": {"Bad Name": "v"}}, "custom_headers"),
    ({"name": "n", "url": URL, "max_retries": 5}, "max_retries"),
    ({"name": "n", "url": URL, "timeout_seconds": 0}, "timeout_seconds"),
    ({"name": "n", "url": URL, "colour": "red"}, "colour"),
])
async def test_invalid_creation_is_a_400_naming_the_field(hook_client: httpx.AsyncClient, factory: Factory,
                                                          body: dict[str, Any], field: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    response = await hook_client.post(BASE, json=body, headers=ws.headers())
    assert response.status_code == 400, response.text
    payload = response.json()
    assert payload["error"] == "invalid_arguments" and payload["message"]
    assert field in [e["field"].split(".")[0] for e in payload["details"]["errors"]]


async def test_unreadable_bodies_are_400_not_500(hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for content in (b"{not json", b"[1, 2]", b""):
        response = await hook_client.post(BASE, content=content, headers=ws.headers())
        assert response.status_code == 400, response.text
        assert response.json()["error"] in ("invalid_json", "invalid_arguments", "missing_body")


async def test_save_time_ssrf_refusals(client: httpx.AsyncClient, factory: Factory) -> None:
    """The shared app runs with the production default: private networks are not allowed."""
    ws = await factory.workspace(roles=("owner",))
    for url in ("https://127.0.0.1/hook", "https://localhost/hook", "https://10.1.2.3/hook",
                "https://169.254.169.254/latest/meta-data/", "https://[::1]/hook", "https://192.168.0.10/x",
                "https://[::ffff:127.0.0.1]/hook", "https://[2002:7f00:1::1]/hook", "https://[2002:a00:1::1]/x",
                "https://user:pw@example.com/hook", "https://[::1/hook"):
        response = await client.post(BASE, json={"name": "n", "url": url}, headers=ws.headers())
        assert response.status_code == 400, (url, response.text)
        assert response.json()["details"]["errors"][0]["field"] == "url"


@pytest.mark.parametrize("url", ["https://[::1/hook", "https://[example.com]/hook", "https://exa\uff03mple.com/x"])
async def test_a_url_that_cannot_be_parsed_is_a_400_naming_the_field(hook_client: httpx.AsyncClient,
                                                                     factory: Factory, url: str) -> None:
    """An unclosed IPv6 bracket, a bracketed name and a host that NFKC turns into `#` make urlsplit raise: each
    is the client's bad URL, on create and on update, whether or not private networks are allowed."""
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, URL)
    for response in (await hook_client.post(BASE, json={"name": "n", "url": url}, headers=ws.headers()),
                     await hook_client.patch(f"{BASE}{hook['id']}/", json={"url": url}, headers=ws.headers())):
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "invalid_arguments"
        assert response.json()["details"]["errors"][0]["field"] == "url"


async def test_another_organizations_webhook_is_not_found(hook_client: httpx.AsyncClient, factory: Factory,
                                                         receiver: Receiver) -> None:
    mine = await factory.workspace(roles=("owner",))
    theirs = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, mine, URL)
    test = await hook_client.post(f"{BASE}{hook['id']}/test/", headers=mine.headers())
    delivery_id = test.json()["id"]
    h = theirs.headers()
    for method, path, body in (
            ("GET", f"{hook['id']}/", None), ("PATCH", f"{hook['id']}/", {"name": "mine now"}),
            ("DELETE", f"{hook['id']}/", None), ("GET", f"{hook['id']}/deliveries/", None),
            ("GET", f"{hook['id']}/deliveries/{delivery_id}/", None), ("POST", f"{hook['id']}/test/", None),
            ("POST", f"{hook['id']}/deliveries/{delivery_id}/resend/", None)):
        response = await hook_client.request(method, BASE + path, json=body, headers=h)
        assert response.status_code == 404, (method, path, response.text)
    assert (await hook_client.get(BASE, headers=h)).json()["count"] == 0
    assert (await hook_client.get(f"{BASE}{hook['id']}/", headers=mine.headers())).json()["name"] == "Receiver"


async def test_a_second_organization_of_the_same_tenant_is_isolated_too(
        hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    other = await factory.second_org(ws)
    await factory.add_key(ws, "other-owner", org=other)
    hook = await create_hook(hook_client, ws, URL)
    response = await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers("other-owner"))
    assert response.status_code == 404


async def test_viewers_may_read_but_not_change_and_strangers_get_401(
        hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "viewer"))
    hook = await create_hook(hook_client, ws, URL)
    assert (await hook_client.get(f"{BASE}{hook['id']}/", headers=ws.headers("viewer"))).status_code == 200
    denied = await hook_client.post(BASE, json={"name": "n", "url": URL}, headers=ws.headers("viewer"))
    assert denied.status_code == 403 and denied.json()["error"] == "permission_denied"
    anonymous = await hook_client.get(BASE, headers={"Host": ws.host})
    assert anonymous.status_code == 401


async def test_delivery_filters_are_validated(hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, URL)
    response = await hook_client.get(f"{BASE}{hook['id']}/deliveries/", params={"status": "lost"},
                                     headers=ws.headers())
    assert response.status_code == 400 and response.json()["details"]["errors"][0]["field"] == "status"


async def test_a_page_number_past_any_real_list_is_a_400_not_a_server_error(
        hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, URL)
    for path in (BASE, f"{BASE}{hook['id']}/deliveries/"):
        response = await hook_client.get(path, params={"page": str(10**30)}, headers=ws.headers())
        assert response.status_code == 400 and response.json()["details"]["errors"][0]["field"] == "page", path


async def test_head_reads_a_webhook_and_never_changes_it(hook_client: httpx.AsyncClient, factory: Factory) -> None:
    """Starlette routes HEAD wherever GET goes: on a webhook it is a read, whatever body it carries."""
    ws = await factory.workspace()
    created = await create_hook(hook_client, ws, URL, name="Kept")
    headed = await hook_client.request("HEAD", f"{BASE}{created['id']}/", headers=ws.headers(),
                                       json={"name": "changed-by-HEAD", "is_active": False})
    assert headed.status_code == 200 and headed.content == b""
    assert (await hook_client.request("HEAD", f"{BASE}{created['id']}/", headers=ws.headers())).status_code == 200
    read = (await hook_client.get(f"{BASE}{created['id']}/", headers=ws.headers())).json()
    assert (read["name"], read["is_active"]) == ("Kept", True)
