"""A custom header value the HTTP client would refuse to send (a control character) is refused when saved, not
failed at every delivery; a webhook whose seal no longer opens (the master secret changed) is repaired by
replacing its secret and headers, and anything else is a 409 that says so, never a 500."""

from __future__ import annotations

import os
from collections.abc import Callable

import httpx
from sqlalchemy import update

from prism.kit.secret import encrypt
from prism.storage import Database
from prism.webhooks.models import Webhook
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory
from tests.governance_support import post
from tests.webhooks_fixtures import BASE, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Receiver

URL = "https://127.0.0.1:9/hook"


# The HTTP client refuses a header value with a control character: a webhook holding one would fail every delivery.
async def test_a_custom_header_value_that_can_never_be_sent_is_refused_at_save_time(
        hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for value in ("token\x01", "a\x0bb", "x\x7f"):
        response = await hook_client.post(BASE, headers=ws.headers(), json={
            "name": "n", "url": URL, "custom_headers": {"X-Token": value}})
        assert response.status_code == 400, (value, response.text)
        assert response.json()["error"] == "invalid_arguments"
        assert response.json()["details"]["errors"][0]["field"].startswith("custom_headers")


async def test_an_accepted_custom_header_value_does_not_make_every_delivery_fail(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    """The end-to-end consequence: the API answered 201, and the receiver never gets anything."""
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    created = await hook_client.post(BASE, headers=ws.headers(), json={
        "name": "n", "url": receiver.url(path), "custom_headers": {"X-Token": "abc\x01def"}})
    if created.status_code == 400:  # refused at save time: the fixed behaviour
        return
    hook = created.json()
    await hook_client.post(f"{BASE}{hook['id']}/test/", headers=ws.headers())
    await make_worker().run_once()
    [delivery] = await deliveries_of(hook_client, ws, hook["id"])
    assert len(receiver.at(path)) == 1, delivery["error_message"]


# After the master secret changes, replacing both the secret and the custom headers needs nothing from the old seal.
async def _break_seal(db: Database, webhook_id: str) -> None:
    other_key = os.urandom(32)  # what a different PRISM_SECRET_KEY derives
    sealed = encrypt(other_key, b'{"secret":"whk_secret_old","headers":{}}', webhook_id)
    async with db.write() as s:
        await s.execute(update(Webhook).where(Webhook.id == webhook_id).values(sealed=sealed))


async def test_replacing_secret_and_headers_of_a_webhook_whose_seal_no_longer_opens_is_not_a_500(
        hook_client: httpx.AsyncClient, factory: Factory, hook_db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, URL)
    await _break_seal(hook_db, hook["id"])
    response = await hook_client.patch(f"{BASE}{hook['id']}/", headers=ws.headers(), json={
        "secret": "whk_secret_" + "k" * 32, "custom_headers": {"Authorization": "Bearer new"}})
    assert response.status_code == 200, response.text


async def test_rotating_the_secret_of_a_webhook_whose_seal_no_longer_opens_is_not_a_500(
        hook_client: httpx.AsyncClient, factory: Factory, hook_db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, URL)
    await _break_seal(hook_db, hook["id"])
    response = await post(hook_client, ws, "config_manage/governance/webhook/rotate_secret", {"id": hook["id"]})
    assert (response.status_code, response.json()["error"]) == (409, "seal_broken"), response.text
    # Only the secret replaced: the headers would have to come from the seal.
    half = await hook_client.patch(f"{BASE}{hook['id']}/", headers=ws.headers(), json={
        "secret": "whk_secret_" + "k" * 32})
    assert (half.status_code, half.json()["error"]) == (409, "seal_broken"), half.text


async def test_the_name_filter_finds_a_name_in_any_script_whatever_its_case(hook_client: httpx.AsyncClient,
                                                                            factory: Factory) -> None:
    """SQLite's own lower() changes ASCII letters only: `Équipe` was not found by `Équipe` (nor by `équipe`)."""
    ws = await factory.workspace(roles=("owner",))
    hook = await create_hook(hook_client, ws, URL, name="Équipe SIEM Ωmega")
    for term in ("Équipe", "équipe", "ÉQUIPE", "ωMEGA", "siem"):
        listed = (await hook_client.get(BASE, params={"name": term}, headers=ws.headers())).json()
        assert [w["id"] for w in listed["results"]] == [hook["id"]], term
