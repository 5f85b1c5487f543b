"""An organization's import of a description given by URL (docs/integrations.md, "Compiled before the
transaction"): fetched and compiled before the call's ledger unit, so its one audit entry says what its answer
says — a description that cannot be fetched or compiled, or a name that is taken, is a refused call, never an
allowed entry followed by an error. And a repeat of an import with an Idempotency-Key replays the first answer
without fetching or compiling anything again (docs/idempotency.md)."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prism.integrations.models import IntegrationApp
from prism.models import AuditEntry
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.integrations_upstream import (  # noqa: F401 -- fixtures: a loopback CA the app trusts; cleanup
    imports_removed_after_the_module_fixture,
    upstream_tls_fixture,
)
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

IMPORT = "config_manage/integrations/integration/importOpenapi"
VALID = json.dumps({
    "openapi": "3.0.3", "info": {"title": "Stock", "version": "1"}, "servers": [{"url": "https://stock.example.com"}],
    "paths": {"/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}}})
NO_OPERATION = json.dumps({"openapi": "3.0.3", "info": {"title": "Empty", "version": "1"}, "paths": {}})


class Descriptions:
    """Descriptions served over HTTPS on loopback, by file name; what was fetched, counted."""

    def __init__(self) -> None:
        self.files = {"valid.json": VALID, "no-operation.json": NO_OPERATION}
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


@pytest.fixture
async def descriptions(tls: TlsFiles) -> AsyncIterator[Descriptions]:
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


async def audited(db: Database, ws: Workspace) -> list[tuple[str, str | None]]:
    async with db.read() as session:
        rows = (await session.execute(select(AuditEntry.outcome, AuditEntry.error_code).where(
            AuditEntry.organization_id == ws.org.id, AuditEntry.coordinate == IMPORT)
            .order_by(AuditEntry.created_at))).all()
    return [(outcome, code) for outcome, code in rows]


def unique() -> str:
    return "byurl_" + uuid.uuid4().hex[:10]


async def test_an_import_by_url_that_fails_is_audited_as_refused(
        client: httpx.AsyncClient, factory: Factory, db: Database, descriptions: Descriptions) -> None:
    ws = await factory.workspace(roles=("owner",))
    holder = await factory.workspace(roles=("owner",))
    taken = unique()
    await ok(client, holder, IMPORT, {"name": taken, "url": descriptions.url("valid.json")})

    invalid = await post(client, ws, IMPORT, {"name": unique(), "url": descriptions.url("no-operation.json")})
    assert invalid.status_code == 400 and invalid.json()["error"] == "invalid_openapi", invalid.text
    missing = await post(client, ws, IMPORT, {"name": unique(), "url": descriptions.url("missing.json")})
    assert missing.status_code == 502 and missing.json()["error"] == "upstream_error", missing.text
    clash = await post(client, ws, IMPORT, {"name": taken, "url": descriptions.url("valid.json")})
    assert clash.status_code == 409 and clash.json()["error"] == "conflict", clash.text
    name = unique()
    imported = await ok(client, ws, IMPORT, {"name": name, "url": descriptions.url("valid.json")})
    assert imported["created"] and imported["handlers"] == 1

    assert await audited(db, ws) == [("refused", "invalid_openapi"), ("refused", "upstream_error"),
                                     ("refused", "conflict"), ("allowed", None)]
    async with db.read() as session:
        stored = (await session.execute(select(IntegrationApp.source, IntegrationApp.owner_organization_id)
                                        .where(IntegrationApp.name == name))).one()
    assert tuple(stored) == (descriptions.url("valid.json"), ws.org.id)
