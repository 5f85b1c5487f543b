"""Each request of a JSON-RPC batch counts in the tenant's MCP window (SPEC.md "Limits"), as it would sent alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from prism.app import create_app
from prism.config import Settings
from tests.factories import Factory
from tests.test_mcp_protocol import call, headers_for, initialize, rpc


@asynccontextmanager
async def _client_of_app(settings: Settings, *, mcp_ceiling: int) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a fresh app (fresh counters) whose tenants may make `mcp_ceiling` MCP requests a minute."""
    limited = create_app(settings.model_copy(update={"rate_limit_mcp": mcp_ceiling}))
    async with limited.router.lifespan_context(limited):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://localhost") as c:
            yield c


async def test_a_batch_counts_each_of_its_requests_and_is_refused_past_the_ceiling(settings: Settings,
                                                                                  factory: Factory) -> None:
    """The edge counts HTTP requests; one POST of a batch held 20 `tools/call`s (a 1 MiB body ~13,000) and ran
    them all for one unit of the ceiling."""
    async with _client_of_app(settings, mcp_ceiling=6) as c:
        ws = await factory.workspace()
        headers = headers_for(ws)
        session = await initialize(c, headers, "2025-03-26")  # 1 of 6
        fits = [rpc("tools/call", {"name": "prism_whoami", "arguments": {}}, request_id=i) for i in range(3)]
        answer = await call(c, headers, session, fits)  # 2, 3, 4 of 6
        assert answer.status_code == 200, answer.text
        assert [a["id"] for a in answer.json()] == [0, 1, 2]
        assert answer.headers["x-ratelimit-remaining"] == "2"
        too_many = [rpc("tools/call", {"name": "prism_whoami", "arguments": {}}, request_id=i) for i in range(3)]
        refused = await call(c, headers, session, too_many)  # 5, 6, 7 of 6: refused whole
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["data"]["error"] == "rate_limited"
        assert refused.headers["retry-after"] and refused.headers["x-ratelimit-remaining"] == "0"


async def test_a_batch_refused_whole_spends_only_its_http_request(settings: Settings, factory: Factory) -> None:
    """A batch refused for its session (none, or a revision without batches) runs nothing: its requests are not
    counted beyond the HTTP request that carried them."""
    async with _client_of_app(settings, mcp_ceiling=20) as c:
        ws = await factory.workspace()
        headers = headers_for(ws)
        five = [rpc("tools/call", {"name": "prism_whoami", "arguments": {}}, request_id=i) for i in range(5)]
        without_session = await c.post("/api/mcp/sse", headers=headers, json=five)  # 1 of 20
        assert without_session.status_code == 400, without_session.text
        assert without_session.json()["error"]["data"]["error"] == "session_required"
        modern_session = await initialize(c, headers, "2025-06-18")  # 2
        no_batches = await call(c, headers, modern_session, five)  # 3
        assert no_batches.status_code == 400 and no_batches.json()["error"]["data"]["error"] == \
            "batch_not_supported", no_batches.text
        session = await initialize(c, headers, "2025-03-26")  # 4
        answer = await call(c, headers, session, rpc("ping", request_id=9))  # 5
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-ratelimit-remaining"] == "15"


async def test_a_batch_of_more_than_a_hundred_messages_is_refused_whole_before_any_is_answered(
        settings: Settings, factory: Factory) -> None:
    """Each member of a batch gets an answer of its own: a megabyte of `0,` asked for half a million errors, some
    78 MB built in memory, for one unit of the window (docs/mcp.md)."""
    async with _client_of_app(settings, mcp_ceiling=1000) as c:
        ws = await factory.workspace()
        headers = headers_for(ws)
        session = await initialize(c, headers, "2025-03-26")
        body = b"[" + b",".join([b"0"] * 200_000) + b"]"
        flood = await c.post("/api/mcp/sse", headers={**headers, "Mcp-Session-Id": session}, content=body)
        assert flood.status_code == 400 and len(flood.content) < 1000, flood.content[:300]
        assert flood.json()["error"]["code"] == -32600 and flood.json()["error"]["data"]["error"] == "batch_too_large"
        hundred = await call(c, headers, session, [rpc("ping", request_id=i) for i in range(100)])
        assert hundred.status_code == 200 and len(hundred.json()) == 100, hundred.text[:300]
        one_more = await call(c, headers, session, [rpc("ping", request_id=i) for i in range(101)])
        assert one_more.status_code == 400 and "at most 100" in one_more.json()["error"]["message"]


async def test_malformed_members_of_a_batch_count_as_the_requests_they_are_answered_as(
        settings: Settings, factory: Factory) -> None:
    """A member that is not a message, or a request whose params is not an object, is answered with its error:
    it counts in the window as a request does (a batch of them was answered for nothing)."""
    async with _client_of_app(settings, mcp_ceiling=6) as c:
        ws = await factory.workspace()
        headers = headers_for(ws)
        session = await initialize(c, headers, "2025-03-26")  # 1 of 6
        malformed = [0, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 1}, "x"]
        answer = await call(c, headers, session, malformed)  # 2, 3, 4 of 6
        assert answer.status_code == 200 and len(answer.json()) == 3, answer.text
        assert answer.headers["x-ratelimit-remaining"] == "2"
        refused = await call(c, headers, session, malformed)  # 5, 6, 7 of 6
        assert refused.status_code == 429, refused.text
