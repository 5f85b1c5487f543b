"""tools/list cursors a client made up."""

from __future__ import annotations

import base64

import httpx
import pytest

from tests.factories import Factory
from tests.test_mcp_protocol import call, headers_for, initialize, rpc


def cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize("forged", ["o:1", "o:7", "o:1000000"])
async def test_a_cursor_prism_did_not_issue_is_invalid_params(client: httpx.AsyncClient, factory: Factory,
                                                             forged: str) -> None:
    """docs/mcp.md: "`tools/list` pages by PRISM_MCP_TOOLS_PAGE_SIZE (default 50, so one page today); `nextCursor`
    is opaque; a cursor Prism did not issue is `-32602`". Prism only issues offsets that are multiples of the page
    size and below the list's length, yet any base64 "o:<digits>" is taken as an offset: "o:1" silently skips
    the first tool, "o:1000000" answers an empty page."""
    ws = await factory.workspace()
    headers = headers_for(ws)
    session = await initialize(client, headers, "2025-06-18")
    first = (await call(client, headers, session, rpc("tools/list"))).json()["result"]
    assert "nextCursor" not in first  # one page: Prism issued no cursor at all
    answer = (await call(client, headers, session, rpc("tools/list", {"cursor": cursor(forged)}))).json()
    assert "error" in answer, answer.get("result", {}).get("tools", [])[:1]
    assert answer["error"]["code"] == -32602 and answer["error"]["data"]["error"] == "invalid_cursor"
