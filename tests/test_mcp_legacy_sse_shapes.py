"""A legacy HTTP+SSE stream speaks its transport's revision, 2024-11-05: its `initialize` answers it and every answer
has its shapes (no `resource_link` content, no tool `title`, `outputSchema`, `_meta` or `structuredContent`)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.factories import Factory
from tests.test_mcp_legacy_sse_refusals_and_shutdown import Stream
from tests.test_mcp_protocol import rpc

UPLOAD = {"name": "prism_document_op", "arguments": {
    "app": "documents", "entity": "document", "operation": "upload",
    "arguments": {"title": "Pump manual", "content": "Bleed the pump before starting it."}}}


async def _answers(client: httpx.AsyncClient, stream: Stream, endpoint: str, headers: dict[str, str],
                   messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Each message POSTed alone, as the SDKs do; the answers read from the stream, by id."""
    for message in messages:
        posted = await client.post(endpoint, headers=headers, json=message)
        assert posted.status_code == 202, posted.text
    answers = {}
    for _ in messages:
        kind, data = await stream.event()
        assert kind == "message"
        answer = json.loads(data)
        answers[answer["id"]] = answer["result"]
    return answers


async def test_a_legacy_stream_speaks_2024_11_05_whatever_the_client_offers(
        app: Any, client: httpx.AsyncClient, factory: Factory) -> None:
    """The SDKs' SSE clients offer their newest revision; the transport is 2024-11-05's, and a 2024-11-05 client
    rejects what later revisions added (a `resource_link` is not in its closed content union)."""
    ws = await factory.workspace()
    async with Stream(app, ws) as stream:
        kind, endpoint = await stream.event()
        assert kind == "endpoint"
        headers = {**ws.headers(), "Content-Type": "application/json"}
        answers = await _answers(client, stream, endpoint, headers, [
            rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "t", "version": "1"}}, request_id=1),
            rpc("tools/list", request_id=2), rpc("tools/call", UPLOAD, request_id=3)])
    assert answers[1]["protocolVersion"] == "2024-11-05"
    crud = next(t for t in answers[2]["tools"] if t["name"] == "prism_entity_crud")
    assert not {"title", "outputSchema", "_meta"} & set(crud)
    assert [c["type"] for c in answers[3]["content"]] == ["text"]
    assert "structuredContent" not in answers[3] and answers[3]["isError"] is False
    assert json.loads(answers[3]["content"][0]["text"])["data"]["title"] == "Pump manual"
