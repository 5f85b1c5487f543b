"""The comparison side of bench/mcp.py: a FastMCP server with one ungoverned tool, over streamable HTTP.

`read_spare_part(id)` answers the record Prism's governed read returned (captured by the benchmark and passed in
PRISM_BENCH_FASTMCP_RECORD), so both sides return the same data; FastMCP does no authentication, no
authorization, no database work and no audit. Served by `uvicorn bench.fastmcp_app:app` with the same settings
as `prism serve`. JSON responses (not SSE), like Prism's door, and FastMCP's stateless mode: in its stateful
mode concurrent requests of one session that reuse a JSON-RPC id (as a fixed wrk body does) collide and hang,
and stateless is its fastest, scale-out configuration anyway.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fastmcp import FastMCP

RECORD: dict[str, Any] = json.loads(Path(os.environ["PRISM_BENCH_FASTMCP_RECORD"]).read_text())
server = FastMCP("bench")


@server.tool
def read_spare_part(id: str) -> dict[str, Any]:
    """Read one spare part by id."""
    if id != RECORD["id"]:
        raise ValueError(f"spare_part {id!r} not found")
    return RECORD


app = server.http_app(path="/mcp", json_response=True, stateless_http=True)
