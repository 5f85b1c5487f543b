"""Each request of a JSON-RPC batch counts in the tenant's MCP window (SPEC.md "Limits"), as it would sent alone."""

from __future__ import annotations

import httpx

from prism.app import create_app
from prism.config import Settings
from tests.factories import Factory
from tests.test_mcp_protocol import call, headers_for, initialize, rpc


async def test_a_batch_counts_each_of_its_requests_and_is_refused_past_the_ceiling(settings: Settings,
                                                                                  factory: Factory) -> None:
    """The edge counts HTTP requests; one POST of a batch held 20 `tools/call`s (a 1 MiB body ~13,000) and ran
    them all for one unit of the ceiling."""
    limited = create_app(settings.model_copy(update={"rate_limit_mcp": 6}))
    async with limited.router.lifespan_context(limited):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=limited), base_url="http://localhost") as c:
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
