"""The floor: a bare Starlette app answering the captured governed response, byte for byte.

It reads the request body (any server has to) and nothing else: no auth, no validation, no database,
no ledger. Served by Uvicorn with the same settings as `prism serve`, it is the most a single Python
worker on this stack can answer; Prism's governed dispatch is measured against it.

    PRISM_BENCH_FLOOR_BODY=/path/to/body.json uvicorn bench.floor_app:app --loop uvloop --http httptools
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

BODY = Path(os.environ["PRISM_BENCH_FLOOR_BODY"]).read_bytes()
PATH = os.environ.get("PRISM_BENCH_FLOOR_PATH", "/api/mcp/tools/prism_entity_crud/")


async def answer(request: Request) -> Response:
    await request.body()
    return Response(BODY, media_type="application/json")


async def ping(request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


app = Starlette(routes=[Route(PATH, answer, methods=["POST"]), Route("/api/v1/dev/ping/", ping)])
