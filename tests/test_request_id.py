"""X-Request-ID: the client's when well formed, else a new one, on every answer of every door (errors, 404s,
probes, metrics included), in the access line and in the call's ledger entry."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from prism.config import Settings
from tests.factories import Factory
from tests.governance_support import entries
from tests.limits_support import client_for, limited_app

LIST_PARTS = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
NEW_ID = re.compile(r"[0-9a-f]{32}")


async def test_every_door_echoes_the_client_id(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    auth, host = ws.headers(), {"Host": ws.host}
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/api/mcp/tools/prism_entity_crud/", {"json": LIST_PARTS, "headers": auth}),
        ("POST", "/prism/entity_crud/spare_parts/spare_part/list", {"json": {}, "headers": auth}),
        ("POST", "/api/v1/dev/call/", {"json": {"name": "prism_entity_crud", "arguments": LIST_PARTS},
                                        "headers": auth}),
        ("POST", "/api/mcp/sse", {"json": INITIALIZE, "headers": {
            **auth, "Accept": "application/json, text/event-stream"}}),
        ("POST", "/api/mcp/sse", {"json": INITIALIZE, "headers": host}),  # 401 on the MCP door
        ("POST", "/api/mcp/tools/prism_entity_crud/", {"json": LIST_PARTS, "headers": host}),  # 401
        ("POST", "/api/mcp/tools/prism_entity_crud/", {"content": b"{", "headers": auth}),  # 400
        ("POST", "/api/mcp/oauth/token", {"data": {"grant_type": "nonsense"}, "headers": host}),
        ("GET", "/.well-known/oauth-authorization-server", {"headers": host}),
        ("GET", "/login/", {"headers": host}),
        ("GET", "/no/such/path", {}),
        ("DELETE", "/healthz", {}),  # 405
        ("GET", "/healthz", {}), ("GET", "/readyz", {}), ("GET", "/metrics", {}),
    ]
    for i, (method, path, options) in enumerate(requests):
        sent = f"door-check:{i}.x_y-z"
        options["headers"] = {**options.get("headers", {}), "X-Request-ID": sent}
        answer = await client.request(method, path, **options)
        assert answer.headers["x-request-id"] == sent, (method, path, answer.status_code, answer.text)
        assert answer.headers.get_list("x-request-id") == [sent]


@pytest.mark.parametrize("sent", ["", "a" * 129, "has space", "new\\nline", "semi;colon", "é"])
async def test_a_malformed_id_is_replaced_by_a_new_one(client: httpx.AsyncClient, sent: str) -> None:
    answer = await client.get("/api/v1/dev/ping/", headers={"X-Request-ID": sent.encode("utf-8")})
    assert NEW_ID.fullmatch(answer.headers["x-request-id"]), answer.headers


async def test_no_id_gets_a_new_one_per_request(client: httpx.AsyncClient) -> None:
    ids = {(await client.get("/api/v1/dev/ping/")).headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(NEW_ID.fullmatch(i) for i in ids)


async def test_refusals_of_the_edge_carry_it(settings: Settings, app: Any) -> None:
    async with limited_app(settings, app, rate_limit_anonymous=1) as limited, client_for(limited) as client:
        await client.get("/api/v1/dev/ping/")
        limited_answer = await client.get("/api/v1/dev/ping/", headers={"X-Request-ID": "over-limit"})
        assert limited_answer.status_code == 429 and limited_answer.headers["x-request-id"] == "over-limit"


async def test_the_ledger_entry_and_the_access_line_carry_it(client: httpx.AsyncClient, factory: Factory, db: Any,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    ws = await factory.workspace(roles=("owner",))
    capsys.readouterr()
    allowed = await client.post("/api/mcp/tools/prism_entity_crud/", json=LIST_PARTS,
                                headers={**ws.headers(), "X-Request-ID": "ledger-allowed"})
    refused = await client.post("/api/mcp/tools/prism_entity_crud/", json={**LIST_PARTS, "operation": "nope"},
                                headers={**ws.headers(), "X-Request-ID": "ledger-refused"})
    assert (allowed.status_code, refused.status_code) == (200, 404)
    made = await client.post("/api/mcp/tools/prism_entity_crud/", json={**LIST_PARTS, "operation": "list"},
                             headers=ws.headers())
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    chain = await entries(db, ws.org.id)
    ids = [entry.detail.get("request_id") for entry in chain]  # type: ignore[union-attr]
    assert ids[-3:] == ["ledger-allowed", "ledger-refused", made.headers["x-request-id"]]
    assert [line["request_id"] for line in logged if line["logger"] == "prism.access"] == ids[-3:]
