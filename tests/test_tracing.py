"""Traces: with PRISM_TRACING=otel a request is a span (continuing the caller's W3C trace), each dispatch stage a
span under it, and the governance decision names the trace; off, nothing is recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

from prism.app import create_app
from prism.config import Settings
from prism.governance.models import GovernanceDecision
from prism.observability.tracing import TRACER
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import governed_key, post

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"
SPARE_PARTS = "entity_crud/spare_parts/spare_part/list"
TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once, as a deployment's would be), recording into memory."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.clear()


@pytest.fixture
async def traced(settings: Settings, spans: InMemorySpanExporter) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    app = create_app(settings.model_copy(update={"tracing": "otel"}))
    try:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
            spans.clear()
            yield app, client
    finally:
        TRACER.disable()  # tracing is process-wide: the rest of the suite runs untraced


async def test_a_request_continues_the_callers_trace_with_a_span_per_dispatch_stage(
        traced: tuple[Any, httpx.AsyncClient], spans: InMemorySpanExporter, factory: Factory) -> None:
    _, client = traced
    ws = await factory.workspace(roles=("owner",))
    response = await client.post(TOOL, headers={**ws.headers(), "traceparent": TRACEPARENT}, json=LIST)
    assert response.status_code == 200, response.text
    recorded = {span.name: span for span in spans.get_finished_spans()}
    request = recorded[f"POST {TOOL}"]
    assert format(request.context.trace_id, "032x") == CALLER_TRACE
    assert request.parent is not None and format(request.parent.span_id, "016x") == "00f067aa0ba902b7"
    assert request.attributes is not None and request.attributes["http.response.status_code"] == 200
    assert request.attributes["prism.request_id"] == response.headers["x-request-id"]
    dispatch = recorded["prism.dispatch"]
    assert dispatch.parent is not None and dispatch.parent.span_id == request.context.span_id
    for name in ("prism.checks", "prism.ledger"):
        assert recorded[name].parent is not None and recorded[name].parent.span_id == dispatch.context.span_id
        assert recorded[name].context.trace_id == request.context.trace_id


async def test_a_governance_decision_names_its_requests_trace(
        traced: tuple[Any, httpx.AsyncClient], spans: InMemorySpanExporter, factory: Factory, db: Database) -> None:
    _, client = traced
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", risk_level="high")
    spans.clear()
    response = await post(client, ws, SPARE_PARTS, {}, label="agent")
    assert response.status_code == 200, response.text
    [request] = [s for s in spans.get_finished_spans() if s.name.startswith("POST ")]
    async with db.read() as session:
        decisions = list((await session.execute(select(GovernanceDecision.trace_id).where(
            GovernanceDecision.organization_id == ws.org.id))).scalars())
    assert format(request.context.trace_id, "032x") in decisions


async def test_nothing_is_recorded_when_tracing_is_off(
        client: httpx.AsyncClient, spans: InMemorySpanExporter, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    spans.clear()
    response = await client.post(TOOL, headers={**ws.headers(), "traceparent": TRACEPARENT}, json=LIST)
    assert response.status_code == 200, response.text
    assert spans.get_finished_spans() == ()
