"""The edge: one middleware stack that every door passes through, a typed context, refusals in each door's shape.

Each test builds its own app (the shared one has its limits raised), so a middleware added here or a lockout
provoked here touches nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from prism.app import create_app
from prism.config import Settings
from prism.edge.context import RequestContext, request_context
from tests.factories import Factory, Workspace

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
LIST = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}
MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

Request = Callable[[httpx.AsyncClient, Workspace], Awaitable[httpx.Response]]

# One request per door and page kind: (name, request).
DOORS: list[tuple[str, Request]] = [
    ("canonical", lambda c, ws: c.post(CANONICAL, headers=ws.headers(), json=LIST)),
    ("per-handler path", lambda c, ws: c.post("/prism/entity_crud/spare_parts/spare_part/list",
                                              headers=ws.headers(), json={})),
    ("sandbox call", lambda c, ws: c.post("/api/v1/dev/call/", headers=ws.headers(),
                                          json={"name": "prism_whoami", "arguments": {}})),
    ("sandbox me", lambda c, ws: c.get("/api/v1/dev/me/", headers=ws.headers())),
    ("ping", lambda c, ws: c.get("/api/v1/dev/ping/")),
    ("mcp", lambda c, ws: c.post("/api/mcp/sse", headers={**ws.headers(), **MCP_HEADERS}, json=MCP_INIT)),
    ("mcp legacy message", lambda c, ws: c.post("/api/mcp/sse?session_id=none", headers={**ws.headers(),
                                                **MCP_HEADERS}, json=MCP_INIT)),
    ("oauth token", lambda c, ws: c.post("/api/mcp/oauth/token/", data={"grant_type": "refresh_token",
                                                                         "refresh_token": "nope"})),
    ("descriptor", lambda c, ws: c.get("/.well-known/openapi.json", headers=ws.headers())),
    ("webhooks", lambda c, ws: c.get("/api/v1/risk-assessment/governance/webhooks/", headers=ws.headers())),
    ("key registration", lambda c, ws: c.post("/api/mcp/api-keys/register/", json={"email": "a@b.example",
                                                                                   "password": "x"})),
    ("login page", lambda c, ws: c.get("/login/")),
    ("unknown path", lambda c, ws: c.get("/no/such/page")),
]


class Witness:
    """A middleware added the way any deployment adds one: marks every answer and keeps every scope it saw."""

    scopes: list[Scope] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        Witness.scopes.append(scope)

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-witness", b"seen")]
            await send(message)

        await self.app(scope, receive, marked)


@asynccontextmanager
async def serving(application: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(application.router.lifespan_context(application))
        transport = httpx.ASGITransport(app=application)
        yield await stack.enter_async_context(httpx.AsyncClient(transport=transport, base_url="http://localhost"))


async def test_a_middleware_added_with_add_middleware_reaches_every_door(settings: Settings,
                                                                         factory: Factory) -> None:
    application = create_app(settings)
    application.add_middleware(Witness)
    Witness.scopes.clear()
    ws = await factory.workspace()
    async with serving(application) as client:
        for name, request in DOORS:
            answer = await request(client, ws)
            assert answer.headers.get("x-witness") == "seen", (name, answer.status_code, answer.text)
    assert len(Witness.scopes) == len(DOORS)


async def test_every_door_gets_one_typed_context_and_no_state_keys(settings: Settings, factory: Factory) -> None:
    application = create_app(settings)
    application.add_middleware(Witness)
    Witness.scopes.clear()
    ws = await factory.workspace()
    async with serving(application) as client:
        for _, request in DOORS:
            await request(client, ws)
    for scope in Witness.scopes:
        assert isinstance(request_context(scope), RequestContext), scope["path"]
        if scope["path"] != "/login/":  # a page keeps its own browser session there, for itself
            assert not scope.get("state"), (scope["path"], scope.get("state"))
    by_path = {s["path"]: request_context(s) for s in Witness.scopes}
    assert by_path[CANONICAL].auth is not None and by_path[CANONICAL].auth.organization_id == ws.org.id
    assert by_path["/api/v1/dev/ping/"].auth is None  # ping never looks at a credential


@pytest.fixture
async def locked_out(settings: Settings, factory: Factory) -> AsyncIterator[tuple[httpx.AsyncClient, Workspace]]:
    """An app whose lockout trips at the first failed credential, with this address locked out."""
    application = create_app(settings.model_copy(update={"lockout_failures": 1}))
    ws = await factory.workspace()
    async with serving(application) as client:
        refused = await client.get("/api/v1/dev/me/", headers={"Authorization": "Bearer ck_" + "n" * 40})
        assert refused.status_code == 401
        yield client, ws


def _refused(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["retry-after"]) > 0
    body: dict[str, Any] = answer.json()
    return body


async def test_a_lockout_is_rendered_in_each_doors_own_shape(locked_out: tuple[httpx.AsyncClient, Workspace]) -> None:
    client, ws = locked_out
    envelope = _refused(await client.post(CANONICAL, headers=ws.headers(), json=LIST))
    assert envelope == {"success": False, "error": "too_many_failed_attempts", "message": envelope["message"],
                        "tool_name": "prism_entity_crud"}
    path = _refused(await client.post("/prism/report_query/finance/invoice/agingApSummary", headers=ws.headers()))
    assert path["success"] is False and path["tool_name"] == "prism_report_query"
    call = _refused(await client.post("/api/v1/dev/call/", headers=ws.headers(), json={"name": "prism_whoami"}))
    assert set(call) == {"error", "message", "tool_name"} and call["error"] == "too_many_failed_attempts"
    answer = await client.post("/api/mcp/sse", headers={**ws.headers(), **MCP_HEADERS}, json=MCP_INIT)
    rpc = _refused(answer)
    assert rpc["jsonrpc"] == "2.0" and rpc["id"] is None and rpc["error"]["data"] == {
        "error": "too_many_failed_attempts"}
    assert answer.headers["x-ratelimit-remaining"] == "0"
    from_a_page = await client.post("/api/mcp/sse", json=MCP_INIT, headers={
        **ws.headers(), **MCP_HEADERS, "Origin": f"http://{ws.host}"})
    assert from_a_page.headers["access-control-allow-origin"] == "*"  # a browser client can read the refusal
    assert "retry-after" in from_a_page.headers["access-control-expose-headers"].lower()
    oauth = _refused(await client.post("/api/mcp/oauth/token/", data={"grant_type": "refresh_token"}))
    assert set(oauth) == {"error", "error_description"}
    page = await client.get("/keys/")
    assert page.status_code == 429 and page.headers["content-type"].startswith("text/html")
    plain = _refused(await client.get("/no/such/page"))
    assert set(plain) == {"error", "message"}


async def test_a_bogus_credential_on_a_page_counts_as_anonymous(settings: Settings) -> None:
    """Pages never check a Bearer credential, so presenting one (valid or not) does not leave the address's
    anonymous window."""
    application = create_app(settings.model_copy(update={"rate_limit_anonymous": 3}))
    pages = ["/no/such/page", "/keys/", "/admin/integrations/webhooks/", "/api/v1/dev/ping/"]
    async with serving(application) as client:
        bogus = {"Authorization": "Bearer whatever"}
        statuses = [(await client.get(page, headers=bogus)).status_code for page in pages]
    assert statuses[:3] == [404, 303, 303], statuses  # the pages send a stranger to the login page
    assert statuses[3] == 429


@asynccontextmanager
async def every_connection_held(application: Starlette) -> AsyncIterator[None]:
    """Check out every connection the app's pools may open and keep them busy."""
    db = application.state.db
    engines = {id(e): e for e in (db.engine, db.read_engine)}.values()
    async with AsyncExitStack() as stack:
        for engine in engines:
            for _ in range(db.options.pool_size + db.options.max_overflow):
                connection = await stack.enter_async_context(engine.connect())
                await connection.execute(text("SELECT 1"))
        yield


async def test_an_exhausted_pool_is_a_503_in_each_doors_shape(settings: Settings, factory: Factory) -> None:
    application = create_app(settings.model_copy(update={
        "database_pool_size": 1, "database_max_overflow": 0, "database_pool_timeout_seconds": 0.2}))
    ws = await factory.workspace()
    async with serving(application) as client:
        assert (await client.post(CANONICAL, headers=ws.headers(), json=LIST)).status_code == 200
        async with every_connection_held(application):
            answers = {
                "canonical": await client.post(CANONICAL, headers=ws.headers(), json=LIST),
                "call": await client.post("/api/v1/dev/call/", headers=ws.headers(), json={"name": "prism_whoami"}),
                "mcp": await client.post("/api/mcp/sse", headers={**ws.headers(), **MCP_HEADERS}, json=MCP_INIT),
                "webhooks": await client.get("/api/v1/risk-assessment/governance/webhooks/", headers=ws.headers()),
                "path": await client.post("/prism/entity_crud/spare_parts/spare_part/list", headers=ws.headers()),
                "oauth": await client.post("/api/mcp/oauth/token/", data={"grant_type": "refresh_token",
                                                                          "refresh_token": "rt_unknown"}),
            }
        for name, answer in answers.items():
            assert answer.status_code == 503, (name, answer.text)
            assert answer.headers["retry-after"].isdigit(), name
        assert answers["canonical"].json()["success"] is False
        assert answers["canonical"].json()["error"] == "database_unavailable"
        assert answers["canonical"].json()["tool_name"] == "prism_entity_crud"
        assert answers["call"].json()["error"] == "database_unavailable"
        assert answers["mcp"].json()["error"]["data"] == {"error": "database_unavailable"}
        assert answers["webhooks"].json()["error"] == "database_unavailable"
        assert answers["path"].json()["tool_name"] == "prism_entity_crud"
        assert answers["oauth"].json() == {"error": "database_unavailable",
                                           "error_description": answers["oauth"].json()["error_description"]}
        # Once the connections are back, everything answers again.
        assert (await client.post(CANONICAL, headers=ws.headers(), json=LIST)).status_code == 200


@pytest.mark.engine_independent
async def test_an_unreachable_database_is_a_503_in_each_doors_shape(settings: Settings, factory: Factory) -> None:
    """A server nobody listens for (a PostgreSQL down or restarting): not a 500."""
    ws = await factory.workspace()
    application = create_app(settings.model_copy(update={"database_url": "postgresql://prism@127.0.0.1:1/gone"}))
    async with serving(application) as client:
        canonical = await client.post(CANONICAL, headers=ws.headers(), json=LIST)
        mcp = await client.post("/api/mcp/sse", headers={**ws.headers(), **MCP_HEADERS}, json=MCP_INIT)
    assert canonical.status_code == 503 and canonical.headers["retry-after"].isdigit(), canonical.text
    assert canonical.json()["error"] == "database_unavailable" and canonical.json()["success"] is False
    assert mcp.status_code == 503 and mcp.json()["error"]["data"] == {"error": "database_unavailable"}


async def test_failed_client_secrets_and_userinfo_tokens_count_toward_the_lockout(settings: Settings) -> None:
    """Pages that check a credential themselves (the OAuth token endpoint's client secret, userinfo's token)
    count their failures like the edge does."""
    application = create_app(settings.model_copy(update={"lockout_failures": 2}))
    async with serving(application) as client:
        wrong_secret = await client.post("/api/mcp/oauth/token/", data={
            "grant_type": "refresh_token", "refresh_token": "rt_x", "client_id": "prism-nobody",
            "client_secret": "wrong"})
        # In the form, not the Authorization header: 400 (RFC 6749 5.2 asks 401 for the header only)
        assert wrong_secret.status_code == 400 and wrong_secret.json()["error"] == "invalid_client"
        bad_token = await client.get("/api/mcp/oauth/userinfo/", headers={"Authorization": "Bearer not-a-jwt"})
        assert bad_token.status_code == 401
        locked = await client.get("/api/v1/dev/ping/")
    assert locked.status_code == 429 and locked.json()["error"] == "too_many_failed_attempts"
