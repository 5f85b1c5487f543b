"""The webhook management API as handlers (config_manage/governance/webhook/...): the same service and
permissions as the REST API, through the dispatcher. The secret is answered once by create and rotate_secret,
sealed at rest, absent from lists, the ledger and the logs; a viewer only reads; another tenant's webhook is
not found."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
import pytest
import stripe
from sqlalchemy import select

from prism.models import AuditEntry
from prism.storage import Database
from prism.webhooks.models import Webhook
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.webhooks_fixtures import unique_path
from tests.webhooks_receiver import Receiver

HOOK = "config_manage/governance/webhook"
DELIVERY = "config_manage/governance/webhook_delivery"
URL = "https://127.0.0.1:9/hook"
ENVELOPE = {"items", "page", "page_size", "total"}


async def test_owner_manages_a_webhook_and_its_secret_is_shown_only_once(
        hook_client: httpx.AsyncClient, factory: Factory, hook_db: Database, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="prism")
    ws = await factory.workspace()
    created = await ok(hook_client, ws, f"{HOOK}/create", {"name": "SIEM", "url": URL,
                                                           "events": ["governance.decision.block"]})
    assert created["secret"].startswith("whk_secret_")
    rotated = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"]})
    assert rotated["secret"].startswith("whk_secret_") and rotated["secret"] != created["secret"]
    changed = await ok(hook_client, ws, f"{HOOK}/update", {"id": created["id"], "name": "SIEM 2",
                                                           "is_active": False})
    assert (changed["name"], changed["is_active"], changed["events"]) == ("SIEM 2", False,
                                                                          ["governance.decision.block"])
    listed = await ok(hook_client, ws, f"{HOOK}/list", {"page_size": 5})
    assert set(listed) == ENVELOPE and listed["total"] == 1 and listed["items"][0]["name"] == "SIEM 2"
    read = await ok(hook_client, ws, f"{HOOK}/read", {"id": created["id"]})

    # Switched off, it never delivers, test events included: a state conflict in the canonical door's envelope.
    refused = await post(hook_client, ws, f"{HOOK}/test", {"id": created["id"]})
    assert refused.status_code == 409 and refused.json()["error"] == "webhook_inactive", refused.text
    await ok(hook_client, ws, f"{HOOK}/update", {"id": created["id"], "is_active": True})
    test = await ok(hook_client, ws, f"{HOOK}/test", {"id": created["id"]})
    assert test["is_test"] is True and test["status"] == "pending"
    again = await ok(hook_client, ws, f"{DELIVERY}/resend", {"webhook_id": created["id"], "id": test["id"]})
    assert again["event_id"] == test["event_id"] and again["id"] != test["id"]
    deliveries = await ok(hook_client, ws, f"{DELIVERY}/list", {"webhook_id": created["id"]})
    assert set(deliveries) == ENVELOPE and {d["id"] for d in deliveries["items"]} == {test["id"], again["id"]}

    async with hook_db.read() as s:
        sealed = (await s.execute(select(Webhook.sealed).where(Webhook.id == created["id"]))).scalar_one()
        ledger = [str(row) for row in (await s.execute(
            select(AuditEntry.coordinate, AuditEntry.detail, AuditEntry.arguments_digest)
            .where(AuditEntry.organization_id == ws.org.id))).all()]
    assert any("webhook/rotate_secret" in entry for entry in ledger)
    for secret in (created["secret"], rotated["secret"]):
        for place in (str(listed), str(read), str(deliveries), sealed, *ledger, caplog.text):
            assert secret not in place

    bad = await post(hook_client, ws, f"{HOOK}/create", {"name": "n", "url": "http://example.com/hook"})
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_arguments"
    removed = await ok(hook_client, ws, f"{HOOK}/delete", {"id": created["id"]})
    assert removed == {"id": created["id"], "deleted": True}
    assert (await ok(hook_client, ws, f"{HOOK}/list", {}))["total"] == 0


async def test_a_viewer_only_reads_and_another_tenant_finds_nothing(hook_client: httpx.AsyncClient,
                                                                    factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "viewer"))
    stranger = await factory.workspace(roles=("owner",))
    hook = await ok(hook_client, ws, f"{HOOK}/create", {"name": "SIEM", "url": URL})
    delivery = await ok(hook_client, ws, f"{HOOK}/test", {"id": hook["id"]})
    assert (await ok(hook_client, ws, f"{HOOK}/list", {}, label="viewer"))["total"] == 1
    changes = {f"{HOOK}/create": ({"name": "n", "url": URL}, "governance.add_webhook"),
               f"{HOOK}/update": ({"id": hook["id"], "name": "n"}, "governance.change_webhook"),
               f"{HOOK}/rotate_secret": ({"id": hook["id"]}, "governance.change_webhook"),
               f"{HOOK}/test": ({"id": hook["id"]}, "governance.change_webhook"),
               f"{HOOK}/delete": ({"id": hook["id"]}, "governance.delete_webhook"),
               f"{DELIVERY}/resend": ({"webhook_id": hook["id"], "id": delivery["id"]}, "governance.change_webhook")}
    for path, (arguments, permission) in changes.items():
        refused = await post(hook_client, ws, path, arguments, label="viewer")
        assert refused.status_code == 403 and permission in refused.json()["message"], (path, refused.text)

    for path, (arguments, _) in changes.items():
        if path.endswith("/create"):
            continue
        hidden = await post(hook_client, stranger, path, arguments)
        assert hidden.status_code == 404 and hidden.json()["error"] == "not_found", (path, hidden.text)
    for path, arguments in ((f"{HOOK}/read", {"id": hook["id"]}), (f"{DELIVERY}/list", {"webhook_id": hook["id"]})):
        hidden = await post(hook_client, stranger, path, arguments)
        assert hidden.status_code == 404 and hidden.json()["error"] == "not_found", (path, hidden.text)
    assert (await ok(hook_client, stranger, f"{HOOK}/list", {}))["total"] == 0
    assert (await ok(hook_client, ws, f"{HOOK}/read", {"id": hook["id"]}))["name"] == "SIEM"


async def test_after_rotation_deliveries_are_signed_with_the_new_secret_only(
        hook_client: httpx.AsyncClient, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker]) -> None:
    ws = await factory.workspace()
    path = unique_path()
    created = await ok(hook_client, ws, f"{HOOK}/create", {"name": "Rx", "url": receiver.url(path),
                                                           "custom_headers": {"Authorization": "Bearer rx"}})
    rotated = await ok(hook_client, ws, f"{HOOK}/rotate_secret", {"id": created["id"]})
    await ok(hook_client, ws, f"{HOOK}/test", {"id": created["id"]})
    assert await make_worker().run_once() >= 1
    [got] = receiver.at(path)
    assert got.headers["authorization"] == "Bearer rx"  # the custom headers survive the rotation
    signature = got.headers["x-governance-signature"]
    stripe.WebhookSignature.verify_header(got.body.decode(), signature, rotated["secret"], tolerance=300)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(got.body.decode(), signature, created["secret"], tolerance=300)
