"""A kept-open session to an upstream MCP server that the upstream no longer takes — it forgot the session (HTTP 404
after a restart, as MCP says) or no longer accepts the credential's token (401) — is discarded, and the call it
refused is sent once more on a new session: the upstream refused it before running any tool. The session was kept
whenever the failure was a JSON-RPC error, so every later call failed for as long as calls kept coming. A real
FastMCP server over HTTPS on loopback; the suite's engine."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from tests.factories import Factory
from tests.governance_support import ok, post
from tests.integrations_mcp_upstream import UPSTREAM_KEY, RunningMcp
from tests.integrations_upstream import upstream_tls_fixture  # noqa: F401 -- fixture: a loopback upstream's TLS
from tests.webhooks_receiver import TlsFiles

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")


class Forgetful:
    """Passes requests on; after `forget()`, every session issued before is unknown (404 with a JSON-RPC error, as
    the MCP SDK's server answers), as after a restart. New sessions work."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.issued: set[bytes] = set()
        self.forgotten: set[bytes] = set()
        self.refused = 0  # JSON-RPC messages refused (not the client's DELETE that ends a session)

    def forget(self) -> None:
        self.forgotten |= self.issued

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"mcp-session-id") in self.forgotten:
            self.refused += scope["method"] == "POST"
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"jsonrpc":"2.0","id":null,"error":'
                        b'{"code":-32600,"message":"Session not found"}}'})
            return

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.issued |= {v for k, v in message.get("headers", []) if k.lower() == b"mcp-session-id"}
            await send(message)

        await self.app(scope, receive, sending)


async def test_a_session_the_upstream_forgot_is_replaced_and_the_refused_call_sent_again(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    running = RunningMcp(tls)
    forgetful = running.gate.app = Forgetful(running.gate.app)
    await running.start()
    try:
        ws = await factory.workspace(roles=("owner",))
        name = "mcp_" + uuid.uuid4().hex[:8]
        await ok(client, ws, "config_manage/integrations/integration/addMcp", {
            "name": name, "url": running.url, "transport": "streamable_http",
            "auth_kind": "api_key", "header": "X-Upstream-Key", "secret": UPSTREAM_KEY})
        path = f"integration_call/{name}/tool/getForecast"
        assert (await post(client, ws, path, {"city": "Oslo"})).status_code == 200  # the session is kept open
        forgetful.forget()  # the upstream restarts

        answers = [await post(client, ws, path, {"city": city}) for city in ("Rome", "Lima", "Pune")]

        assert [a.status_code for a in answers] == [200, 200, 200], answers[0].text
        assert forgetful.refused == 1  # the one refused call was sent again on a new session, kept since
        assert running.server.calls == ["get_forecast"] * 4  # type: ignore[attr-defined]  # each ran once
    finally:
        await running.stop()


async def test_a_session_whose_token_the_upstream_no_longer_takes_gets_a_new_token(
        client: httpx.AsyncClient, factory: Factory, tls: TlsFiles) -> None:
    running = await RunningMcp(tls).start()
    running.gate.oauth_client = ("prism-client", "client-s3cret")
    try:
        ws = await factory.workspace(roles=("owner",))
        name = "mcp_" + uuid.uuid4().hex[:8]
        await ok(client, ws, "config_manage/integrations/integration/addMcp", {
            "name": name, "url": running.url, "transport": "streamable_http", "auth_kind": "oauth2_client_credentials",
            "client_id": "prism-client", "token_url": f"https://127.0.0.1:{running.port}/oauth/token",
            "secret": "client-s3cret"})
        path = f"integration_call/{name}/tool/getForecast"
        assert (await post(client, ws, path, {"city": "Oslo"})).status_code == 200
        issued = running.gate.tokens_issued
        running.gate.access_token = "mcp-at-" + "n3w" * 8  # the token Prism holds is refused (401) from now on

        answers = [await post(client, ws, path, {"city": city}) for city in ("Rome", "Lima")]

        assert [a.status_code for a in answers] == [200, 200], answers[0].text
        assert running.gate.tokens_issued == issued + 1  # asked for once, kept for the new session
        assert running.server.calls == ["get_forecast"] * 3  # type: ignore[attr-defined]
    finally:
        await running.stop()
