"""An address written in a form the HTTP client normalises (full-width digits, ideographic full stops, a mix) is
the address it connects to, and is vetted as such: refused for loopback by the outbound client itself (aiohttp's),
by the MCP client's transport (httpx2's), for an upstream MCP server's OAuth token endpoint before anything is
sent there, and for a client metadata document named by an anonymous /authorize, whose refusal says the same
whether a port listens or not. Each against a real loopback listener that must hear nothing."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import httpx2
import pytest

from prism.kit.outbound import OutboundClient, OutboundFailed, ssl_context
from prism.kit.outbound_httpx import guarded_transport
from tests.factories import Factory
from tests.governance_support import post
from tests.oauth_support import OAUTH, authorize_params, pkce

pytestmark = pytest.mark.usefixtures("imports_removed_after_the_module")

IDEOGRAPHIC_FULL_STOP, FULL_WIDTH_FULL_STOP = "\u3002", "\uff0e"


def full_width(text: str) -> str:
    """Digits and full stops as their full-width forms (U+FF10-FF19, U+FF0E)."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isdigit() or c == "." else c for c in text)


# 127.0.0.1 as yarl and httpx2 read it, but urllib does not: full-width digits and full stops, ideographic full
# stops, and a mix of the forms.
FORMS = {"full-width": full_width("127.0.0.1"),
         "full-width-digits": full_width("127.0.0.1").replace(FULL_WIDTH_FULL_STOP, "."),
         "ideographic": "127.0.0.1".replace(".", IDEOGRAPHIC_FULL_STOP),
         "mixed": f"{full_width('127')}{IDEOGRAPHIC_FULL_STOP}0.{full_width('0.')}1"}


@dataclass
class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections made to it (and answers none)."""

    port: int
    connections: list[bytes] = field(default_factory=list)

    def url(self, host: str, path: str = "/internal", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    heard = Listener(0)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.connections.append(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    heard.port = server.sockets[0].getsockname()[1]
    try:
        yield heard
    finally:
        server.close()
        await server.wait_closed()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("encoded", [False, True])
async def test_the_outbound_client_refuses_loopback_written_in_any_form(listener: Listener, form: str,
                                                                        encoded: bool) -> None:
    async with OutboundClient(allow_private_networks=False) as client:
        # Read as 127.0.0.1 (not encoded), the refusal names its kind; sent as written, the host is a name to
        # the guard, which says only that it is not public.
        refused = r"loopback" if not encoded else r"is not a public address"
        with pytest.raises(OutboundFailed, match=rf"refused by Prism.*{refused}"):
            await client.send("POST", listener.url(FORMS[form]), headers={}, body=b"x", timeout_seconds=5,
                              read_at_most=100, encoded=encoded)
    await asyncio.sleep(0.05)
    assert listener.connections == []


@pytest.mark.parametrize("form", ["ideographic", "mixed"])
async def test_the_mcp_clients_transport_refuses_loopback_written_in_any_form(listener: Listener,
                                                                              form: str) -> None:
    """httpx2 maps the host as yarl does, or refuses it (full-width digits); either way the connection is
    made by Prism's backend, which vets the address it was given."""
    transport = guarded_transport(allow_private_networks=False, ssl_context=ssl_context(None))
    async with httpx2.AsyncClient(transport=transport, trust_env=False, timeout=5) as http:
        with pytest.raises((httpx2.ConnectError, httpx2.InvalidURL)):
            await http.post(listener.url(FORMS[form]), content=b"x")
    assert listener.connections == []


@pytest.mark.parametrize("form", [*FORMS, "plain"])
async def test_an_mcp_servers_token_endpoint_on_loopback_is_refused_before_anything_is_sent(
        client: httpx.AsyncClient, factory: Factory, listener: Listener, form: str) -> None:
    """The upstream's own URL is public (a literal address, nothing resolved); its token endpoint is on loopback:
    refused when the integration is added, before the client's credentials are posted anywhere."""
    ws = await factory.workspace(roles=("owner",))
    host = FORMS.get(form, "127.0.0.1")
    refused = await post(client, ws, "config_manage/integrations/integration/addMcp", {
        "name": "mcp_" + uuid.uuid4().hex[:8], "url": "https://1.1.1.1/mcp", "timeout_seconds": 2,
        "auth_kind": "oauth2_client_credentials", "client_id": "prism", "secret": "client-secret",
        "token_url": listener.url(host, "/oauth/token", scheme="https")})
    assert refused.status_code == 400, refused.text[:400]
    assert refused.json()["error"] == "url_not_allowed" and "token_url" in refused.json()["message"]
    await asyncio.sleep(0.05)
    assert listener.connections == []


async def _authorize(client: httpx.AsyncClient, client_id: str) -> httpx.Response:
    _, challenge = pkce()
    return await client.get(f"{OAUTH}/authorize/",
                            params=authorize_params(client_id, challenge, redirect_uri="http://127.0.0.1:9/cb"))


@pytest.mark.parametrize("form", [*FORMS, "plain"])
async def test_a_client_document_on_loopback_is_refused_alike_whether_its_port_listens(
        client: httpx.AsyncClient, listener: Listener, form: str) -> None:
    """/authorize needs no sign-in: what its refusal says must not tell a listening port from a closed one."""
    host = FORMS.get(form, "127.0.0.1")
    messages = []
    for port in (listener.port, closed_port()):
        page = await _authorize(client, f"https://{host}:{port}/cimd/{form}.json")
        assert page.status_code == 400 and "invalid_client" in page.text, page.text[:400]
        messages.append(page.text.replace(str(port), "PORT"))
    assert messages[0] == messages[1]
    assert "must name a public host" in messages[0]
    await asyncio.sleep(0.05)
    assert listener.connections == []
