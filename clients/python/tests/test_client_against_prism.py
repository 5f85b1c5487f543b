"""PrismClient and AsyncPrismClient against a running Prism (`prism serve` on the test database)."""

from __future__ import annotations

import pytest
from prism_client import (
    AsyncPrismClient,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    OversightRequiredError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PrismClient,
)
from prism_client.types import Delivery, DeliveryList, ToolCatalog, Webhook, WebhookList
from tests.factories import Factory
from tests.live_prism import LiveServer

from prism.keys.service import lookup_of


async def test_sync_client_covers_sandbox_dispatch_and_introspection(live_prism: LiveServer,
                                                                     factory: Factory) -> None:
    ws = await factory.workspace()
    with PrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        assert prism.ping()["version"] == "v1"
        me = prism.me()
        assert me["authenticated"] is True and me["tenant"]["subdomain"] == ws.tenant.subdomain
        catalog = prism.tools(search="entity")
        assert catalog["count"] == 1 and catalog["tools"][0]["name"] == "prism_entity_crud"
        assert "mega_tools" in str(prism.introspect(dimension="mega_tools"))
        created = prism.dispatch("entity_crud", "spare_parts", "spare_part", "create",
                                 {"sku": "PY-1", "name": "Bearing", "quantity": 3})
        page = prism.dispatch("entity_crud", "spare_parts", "spare_part", "list", {"search": "PY-1"})
        assert [item["id"] for item in page["items"]] == [created["id"]]
        by_door = prism.call_tool("prism_entity_crud", app="spare_parts", entity="spare_part", operation="read",
                                  arguments={"id": created["id"]})
        assert by_door["sku"] == "PY-1"
        assert prism.call("prism_whoami")["user"]["email"] == ws.emails["owner"]


async def test_sync_client_raises_exceptions_carrying_the_error_code(live_prism: LiveServer,
                                                                     factory: Factory) -> None:
    ws = await factory.workspace()
    with PrismClient(live_prism.base_url, ws.keys["viewer"], timeout=10) as prism:
        with pytest.raises(BadRequestError) as bad:
            prism.dispatch("entity_crud", "spare_parts", "spare_part", "list", {"page": 0})
        assert bad.value.code == "invalid_arguments" and bad.value.status == 400
        assert bad.value.details["errors"][0]["field"] == "page"
        with pytest.raises(NotFoundError) as missing:
            prism.dispatch("entity_crud", "spare_parts", "nothing", "list")
        assert missing.value.code == "operation_not_found" and missing.value.tool_name == "prism_entity_crud"
        with pytest.raises(PermissionDeniedError) as denied:
            prism.dispatch("entity_crud", "spare_parts", "spare_part", "create", {"sku": "X", "name": "X"})
        assert denied.value.code == "permission_denied"
    with PrismClient(live_prism.base_url, "ck_not_a_real_key_at_all", timeout=10) as anonymous:
        with pytest.raises(AuthenticationError) as refused:
            anonymous.me()
        assert refused.value.code == "invalid_token" and refused.value.status == 401


async def test_async_client_dispatches_and_revalidates_the_descriptor(live_prism: LiveServer,
                                                                      factory: Factory) -> None:
    ws = await factory.workspace()
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        assert (await prism.me())["user"]["email"] == ws.emails["owner"]
        report = await prism.dispatch("report_query", "finance", "invoice", "agingApSummary", {})
        assert isinstance(report, dict)
        first = await prism.descriptor()
        assert first["document"] is not None and first["document"]["openapi"] == "3.0.3"
        assert "/prism/report_query/finance/invoice/agingApSummary" in first["document"]["paths"]
        unchanged = await prism.descriptor(etag=first["etag"])
        assert unchanged == {"etag": first["etag"], "document": None}
        with pytest.raises(NotFoundError) as missing:
            await prism.call("prism_nothing_here")
        assert missing.value.code == "tool_not_found"


async def test_webhook_helpers_manage_a_webhook_end_to_end(live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace()
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        created = await prism.create_webhook("Ops hook", "https://127.0.0.1:9/hook", events=["ticket.created"])
        assert created["id"].startswith("whk_") and created["secret"].startswith("whk_secret_")
        listed = await prism.list_webhooks(name="Ops")
        assert [w["id"] for w in listed["results"]] == [created["id"]]
        assert "secret" not in listed["results"][0]
        updated = await prism.update_webhook(created["id"], is_active=False)
        assert updated["is_active"] is False
        assert (await prism.get_webhook(created["id"]))["name"] == "Ops hook"
        deliveries = await prism.list_deliveries(created["id"])
        assert deliveries["count"] == 0
        await prism.delete_webhook(created["id"])
        with pytest.raises(NotFoundError):
            await prism.get_webhook(created["id"])
        with pytest.raises(BadRequestError) as bad:
            await prism.create_webhook("Plain", "http://example.com/hook")
        assert bad.value.status == 400


async def test_a_call_held_for_oversight_raises_oversight_required_with_its_request_id(
        live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace()
    agent_key = await factory.add_key(ws, "agent")
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as owner:
        persona = await owner.dispatch("config_manage", "governance", "persona", "create", {
            "name": "gated-vendors", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"]})
        await owner.dispatch("config_manage", "governance", "persona", "attach",
                             {"key": lookup_of(agent_key), "persona_id": persona["id"]})
    async with AsyncPrismClient(live_prism.base_url, agent_key, timeout=10) as agent:
        with pytest.raises(OversightRequiredError) as held:
            await agent.dispatch("entity_crud", "finance", "vendor", "create", {"name": "Acme"})
    assert held.value.status == 202 and held.value.code == "oversight_required"
    assert held.value.details["oversight_request_id"].startswith("ovr_")


async def test_a_lone_surrogate_is_sent_escaped_and_refused_by_prism_as_json_it_cannot_read(
        live_prism: LiveServer, factory: Factory) -> None:
    # UTF-8 cannot encode a lone surrogate: sent as the escape `\ud800`, which Prism refuses on every door.
    ws = await factory.workspace()
    with PrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        with pytest.raises(BadRequestError) as refused:
            prism.dispatch("entity_crud", "spare_parts", "spare_part", "create", {"sku": "PY-S", "name": "x\ud800"})
        assert refused.value.status == 400 and refused.value.code == "invalid_json"
        with pytest.raises(BadRequestError, match="invalid_json"):
            prism.call("prism_whoami", {"note": "\udfff"})
        paired = prism.dispatch("entity_crud", "spare_parts", "spare_part", "create",
                                {"sku": "PY-S", "name": "gear \ud83d\ude00 é"})
    assert paired["name"] == "gear \U0001f600 é", "a surrogate pair is the character it encodes"
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as aprism:
        with pytest.raises(BadRequestError, match="invalid_json"):
            await aprism.create_webhook("half \ud800", "https://127.0.0.1:9/hook")


async def test_a_body_over_prisms_ceiling_raises_payload_too_large(live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace()
    with PrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        with pytest.raises(PayloadTooLargeError) as refused:
            prism.dispatch("entity_crud", "spare_parts", "spare_part", "create",
                           {"sku": "PY-BIG", "name": "x" * (1 << 20)})
    assert refused.value.status == 413 and refused.value.code == "payload_too_large"


async def test_resend_makes_a_new_delivery_and_the_types_name_every_field_prism_answers(
        live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace()
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        hook = await prism.create_webhook("Resend hook", "https://127.0.0.1:9/hook")
        sent = await prism.send_test_event(hook["id"])
        again = await prism.resend_delivery(hook["id"], sent["id"])
        assert again["id"] != sent["id"] and again["event_id"] == sent["event_id"]
        assert again["webhook_id"] == sent["webhook_id"] == hook["id"] and again["is_test"] is True
        webhook = await prism.get_webhook(hook["id"])
        hooks = await prism.list_webhooks(name="Resend hook")
        deliveries = await prism.list_deliveries(hook["id"], page_size=1)
    with PrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as sync_prism:
        assert sync_prism.resend_delivery(hook["id"], sent["id"])["event_id"] == sent["event_id"]
        catalog = sync_prism.tools()
    assert set(webhook) == Webhook.__required_keys__ and webhook["deactivated_reason"] is None
    assert set(hook) == Webhook.__required_keys__ | {"secret"}
    assert set(again) == Delivery.__required_keys__
    assert set(hooks) == WebhookList.__required_keys__ and hooks["items"] == hooks["results"]
    assert set(deliveries) == DeliveryList.__required_keys__
    assert (deliveries["page"], deliveries["page_size"], deliveries["total"]) == (1, 1, 2)
    assert set(catalog) == ToolCatalog.__required_keys__ and catalog["total"] == catalog["count"]


async def test_the_iterators_follow_prisms_pages_to_the_end(live_prism: LiveServer, factory: Factory) -> None:
    ws = await factory.workspace()
    async with AsyncPrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as prism:
        hooks = [(await prism.create_webhook(f"Paged {n}", "https://127.0.0.1:9/hook"))["id"] for n in range(5)]
        sent = [(await prism.send_test_event(hooks[0]))["id"] for _ in range(3)]
        listed_hooks = [hook["id"] async for hook in prism.iter_webhooks(name="Paged", page_size=2)]
        listed_deliveries = [d["id"] async for d in prism.iter_deliveries(hooks[0], page_size=2)]
    assert sorted(listed_hooks) == sorted(hooks) and sorted(listed_deliveries) == sorted(sent)
    with PrismClient(live_prism.base_url, ws.keys["owner"], timeout=10) as sync_prism:
        catalog = sync_prism.tools(page_size=100)
        assert catalog["total"] > 3, "the catalog must span several pages of 3"
        assert [tool["name"] for tool in sync_prism.iter_tools(page_size=3)] == [t["name"] for t in catalog["tools"]]
        assert [hook["id"] for hook in sync_prism.iter_webhooks(name="Paged", page_size=4)] == listed_hooks
        assert list(sync_prism.iter_deliveries(hooks[1])) == []
