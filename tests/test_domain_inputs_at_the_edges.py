"""Inputs a client can send to the built-in handlers that end in a 500 instead of an answer or a 400/409."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.domain_support import Caller
from tests.factories import Factory


def _deep(depth: int = 300) -> object:
    body: object = 1
    for _ in range(depth):
        body = [body]
    return body


def _not_a_failure(status: int, body: dict[str, Any], allowed: tuple[int, ...]) -> None:
    assert status in allowed, (status, body)
    assert isinstance(body.get("success"), bool), body


async def test_sla_breaches_as_of_the_last_day_representable_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # The Moment validator accepts any zoned time UTC can hold; the report then adds 24 hours to it.
    c = Caller(client, await factory.workspace(roles=("owner",)))
    status, body = await c.raw("report_query", "itsm", "ticket", "slaBreaches", {"as_of": "9999-12-31T12:00:00Z"})
    _not_a_failure(status, body, (200, 400))


async def test_generating_due_work_orders_on_the_last_date_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    asset = await c.create("maintenance", "asset", {"tag": "PMP-1", "name": "Pump"})
    await c.create("maintenance", "plan", {"asset_id": asset["id"], "title": "Grease bearings",
                                           "interval_days": 30, "next_due": "9999-12-20"})
    status, body = await c.raw("smart_action", "maintenance", "plan", "generateDueWorkOrders",
                               {"as_of": "9999-12-31"})
    # Either the work order is made (the plan cannot move past the calendar) or the call is refused; never a 500.
    _not_a_failure(status, body, (200, 400, 409))


async def test_integration_call_with_a_body_nested_deeper_than_json_encodes_is_a_400(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # `body` is the handler's free-form JSON field: accepted by validation, then orjson.dumps fails in the handler.
    c = Caller(client, await factory.workspace(roles=("owner",)))
    endpoint = await c.create("integrations", "endpoint", {"name": "ERP", "base_url": "https://93.184.215.14/api"})
    status, body = await c.raw("integration_call", "integrations", "endpoint", "call",
                               {"id": endpoint["id"], "body": _deep()})
    assert (status, body.get("error")) == (400, "invalid_arguments"), (status, body)


@pytest.mark.parametrize("depth", [900, 5000])
async def test_uploading_deeply_nested_json_content_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory, depth: int) -> None:
    # A JSON document that does not parse is stored and marked failed (ExtractionError); one nested deeper than
    # the extractor recurses must not fail the whole call.
    c = Caller(client, await factory.workspace(roles=("owner",)))
    status, body = await c.raw("document_op", "documents", "document", "upload", {
        "title": "deep", "content": "[" * depth + "]" * depth, "content_type": "application/json"})
    _not_a_failure(status, body, (200, 400))
    if status == 200:
        assert body["data"]["status"] in ("processed", "failed"), body


async def test_similar_documents_of_a_document_whose_content_does_not_parse_is_not_a_500(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    document = await c.ok("document_op", "documents", "document", "upload", {
        "title": "broken", "content": "{not json", "content_type": "application/json"})
    assert document["status"] == "failed"
    status, body = await c.raw("knowledge_query", "documents", "document", "similar", {"id": document["id"]})
    _not_a_failure(status, body, (200, 409))


async def test_stock_received_past_what_a_part_may_hold_is_refused(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # PostgreSQL's INTEGER column overflowed (a 500) after 214 receipts of 10^7; SQLite stored any number.
    c = Caller(client, await factory.workspace(roles=("owner",)))
    part = await c.create("spare_parts", "spare_part", {"sku": "BRG-1", "name": "Bearing", "quantity": 9_999_990})
    status, body = await c.raw("workflow_action", "spare_parts", "spare_part", "receiveStock",
                               {"id": part["id"], "quantity": 10})
    assert status == 200, body
    status, body = await c.raw("workflow_action", "spare_parts", "spare_part", "receiveStock",
                               {"id": part["id"], "quantity": 1})
    assert (status, body.get("error")) == (409, "conflict"), body
    assert (await c.read("spare_parts", "spare_part", part["id"]))["quantity"] == 10_000_000


async def test_a_call_whose_url_the_call_log_cannot_hold_is_refused_before_it_is_sent(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # integrations_call_logs.url is VARCHAR(4096): on PostgreSQL the log's insert failed after the request had
    # gone out (a 500, and no log, for a module that promises every call is logged).
    c = Caller(client, await factory.workspace(roles=("owner",)))
    endpoint = await c.create("integrations", "endpoint", {"name": "ERP", "base_url": "https://93.184.215.14/api",
                                                           "timeout_seconds": 1})
    status, body = await c.raw("integration_call", "integrations", "endpoint", "call",
                               {"id": endpoint["id"], "query": {"q": "x" * 5000}})
    assert (status, body.get("error")) == (400, "invalid_arguments"), body
    assert "query" in body["message"], body
    logs = await c.ok("entity_crud", "integrations", "call_log", "list", {"endpoint_id": endpoint["id"]})
    assert logs["items"] == [], logs


async def test_a_date_parameter_takes_a_day_not_a_date_time_or_a_number(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    for as_of in ("2024-01-01T00:00:00+05:00", "2024-01-01T00:00:00Z", 1_704_067_200):
        status, body = await c.raw("report_query", "finance", "invoice", "agingApSummary", {"as_of": as_of})
        assert (status, body["error"]) == (400, "invalid_arguments"), (as_of, body)
        assert [e["field"] for e in body["details"]["errors"]] == ["as_of"], body
        status, body = await c.raw("report_query", "maintenance", "work_order", "backlog", {"as_of": as_of})
        assert (status, body["error"]) == (400, "invalid_arguments"), (as_of, body)
    assert (await c.ok("report_query", "finance", "invoice", "agingApSummary", {"as_of": "2024-01-01"}))["as_of"] \
        == "2024-01-01"
