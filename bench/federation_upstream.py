"""The upstream of bench/federation.py: a FastMCP server with one tool, over streamable HTTP (JSON answers,
stateless), served by `uvicorn bench.federation_upstream:app` over HTTPS on loopback."""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP

server = FastMCP("upstream")


@server.tool(annotations={"readOnlyHint": True})
def lookup_part(sku: str) -> dict[str, Any]:
    """Look a spare part up by SKU."""
    return {"sku": sku, "name": "Bearing 6204", "on_hand": 12}


app = server.http_app(path="/mcp", json_response=True, stateless_http=True)
