"""OpenAPI descriptions served over HTTPS on loopback, for imports by URL (`descriptions`, with the upstream's TLS
fixture it needs: import both)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.integrations_upstream import upstream_tls_fixture
from tests.webhooks_receiver import TlsFiles

__all__ = ["NO_OPERATION", "VALID", "Descriptions", "descriptions_fixture", "upstream_tls_fixture"]

VALID = json.dumps({
    "openapi": "3.0.3", "info": {"title": "Stock", "version": "1"}, "servers": [{"url": "https://stock.example.com"}],
    "paths": {"/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}}})
NO_OPERATION = json.dumps({"openapi": "3.0.3", "info": {"title": "Empty", "version": "1"}, "paths": {}})


class Descriptions:
    """Descriptions served over HTTPS on loopback, by file name; what was fetched, counted."""

    def __init__(self) -> None:
        self.files = {"valid.json": VALID, "no-operation.json": NO_OPERATION}  # more added by the tests
        self.fetched: Counter[str] = Counter()
        self.base = ""

    async def serve(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.fetched[name] += 1
        if name not in self.files:
            return Response("no such description", status_code=404)
        return Response(self.files[name], media_type="application/json")

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"


@pytest.fixture(name="descriptions")
async def descriptions_fixture(tls: TlsFiles) -> AsyncIterator[Descriptions]:
    served = Descriptions()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/{name}", served.serve)]),
                                           ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key),
                                           log_level="error", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
        await asyncio.sleep(0.01)
    served.base = f"https://127.0.0.1:{sock.getsockname()[1]}"
    yield served
    server.should_exit = True
    await task
    sock.close()
