"""A rotation may keep the replaced signing secret signing for a while (`keep_previous_seconds`, docs/webhooks.md):
each delivery then carries a second `v1=` by it, which Stripe's verifier accepts, so a receiver keeps working
while its configuration moves to the new secret; past that time, and after a later rotation or a secret a person
sets, only the new one signs. Deliveries to a real HTTPS receiver on loopback, checked with Stripe's verifier."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
import stripe

from prism.kit.timeutil import utcnow
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.webhooks_fixtures import FakeClock, unique_path
from tests.webhooks_receiver import Receiver

HOOK = "config_manage/governance/webhook"


def verifies(got_body: bytes, signature: str, secret: str) -> bool:
    try:
        stripe.WebhookSignature.verify_header(got_body.decode(), signature, secret, tolerance=300)
    except stripe.SignatureVerificationError:
        return False
    return True


async def delivered_signature(client: httpx.AsyncClient, ws: Workspace, hook_id: str, receiver: Receiver,
                              path: str, worker: DeliveryWorker, clock: FakeClock) -> tuple[bytes, str]:
    await ok(client, ws, f"{HOOK}/test", {"id": hook_id})
    clock.advance_to(utcnow())  # the test event is due by the API's clock
    assert await worker.run_once() >= 1
    got = receiver.at(path)[-1]
    return got.body, got.headers["x-governance-signature"]


async def test_the_replaced_secret_signs_beside_the_new_one_until_its_time_is_up(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    created = await ok(hook_client, ws, f"{HOOK}/create", {"name": "Rx", "url": receiver.url(path),
                                                           "custom_headers": {"Authorization": "Bearer rx"}})
    clock = FakeClock()
    worker = make_worker(clock=clock)
    rotated = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"], "keep_previous_seconds": 3600})
    assert rotated["previous_secret_valid_until"] and rotated["secret"] != created["secret"]
    body, signature = await delivered_signature(hook_client, ws, created["id"], receiver, path, worker, clock)
    assert signature.count("v1=") == 2
    assert verifies(body, signature, rotated["secret"]) and verifies(body, signature, created["secret"])
    assert receiver.at(path)[-1].headers["authorization"] == "Bearer rx"

    clock.advance(3601)  # the time is up: the new secret alone
    body, signature = await delivered_signature(hook_client, ws, created["id"], receiver, path, worker, clock)
    assert signature.count("v1=") == 1
    assert verifies(body, signature, rotated["secret"]) and not verifies(body, signature, created["secret"])


async def test_a_later_rotation_or_a_chosen_secret_ends_what_was_kept(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace(roles=("owner",))
    path = unique_path()
    created = await ok(hook_client, ws, f"{HOOK}/create", {"name": "Rx", "url": receiver.url(path)})
    clock = FakeClock()
    worker = make_worker(clock=clock)
    first = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"], "keep_previous_seconds": 600})
    second = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"]})  # kept nothing
    assert second["previous_secret_valid_until"] is None
    body, signature = await delivered_signature(hook_client, ws, created["id"], receiver, path, worker, clock)
    assert verifies(body, signature, second["secret"])
    assert not verifies(body, signature, first["secret"]) and not verifies(body, signature, created["secret"])

    third = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"], "keep_previous_seconds": 600})
    chosen = "whk_secret_" + "c" * 40
    await ok(hook_client, ws, f"{HOOK}/update", {"id": created["id"], "secret": chosen})
    body, signature = await delivered_signature(hook_client, ws, created["id"], receiver, path, worker, clock)
    assert verifies(body, signature, chosen) and not verifies(body, signature, third["secret"])
    # Custom headers changed alone keep the secrets as they are, the kept one too.
    fourth = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"], "keep_previous_seconds": 600})
    await ok(hook_client, ws, f"{HOOK}/update", {"id": created["id"], "custom_headers": {"X-Team": "ops"}})
    body, signature = await delivered_signature(hook_client, ws, created["id"], receiver, path, worker, clock)
    assert verifies(body, signature, fourth["secret"]) and verifies(body, signature, chosen)


@pytest.mark.parametrize("seconds", [-1, 7 * 24 * 3600 + 1, "1h"])
async def test_a_time_to_keep_out_of_range_is_refused(hook_client: httpx.AsyncClient, factory: Factory,
                                                      receiver: Receiver, seconds: object) -> None:
    ws = await factory.workspace(roles=("owner",))
    created = await ok(hook_client, ws, f"{HOOK}/create", {"name": "Rx", "url": receiver.url(unique_path())})
    refused = await post(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"],
                                                                    "keep_previous_seconds": seconds})
    assert refused.status_code == 400 and "keep_previous_seconds" in refused.json()["message"], refused.text


