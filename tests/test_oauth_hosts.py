"""Hosts and origins: only PRISM_BASE_DOMAIN, its tenants, the loopback names and PRISM_EXTRA_HOSTS are answered,
an unknown Host never reaches an issuer or a link, and the MCP door refuses foreign browser origins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from tests.factories import Factory
from tests.test_mcp_protocol import JSON_AND_SSE, PATH

DISCOVERY = ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
             "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/api/mcp/sse",
             "/.well-known/jwks.json")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "conformance-dns-rebinding-test", "version": "1.0.0"}}}


@pytest.fixture
async def configured(app: Any, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An app with an extra host and an allowed browser origin."""
    other = create_app(settings.model_copy(update={"extra_hosts": "prism.internal.example:9000, 10.1.2.3",
                                                   "mcp_allowed_origins": "https://inspector.example.com"}),
                       registry=app.state.registry)
    async with other.router.lifespan_context(other):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://localhost") as c:
            yield c


@pytest.mark.parametrize("path", [*DISCOVERY, "/api/mcp/oauth/authorize/", "/api/v1/dev/ping/", "/login/",
                                  "/no/such/path"])
async def test_an_unknown_host_is_421_and_never_reflected(client: httpx.AsyncClient, path: str) -> None:
    answer = await client.get(path, headers={"Host": "evil.example.com:8000"})
    assert answer.status_code == 421, answer.text
    assert "evil" not in answer.text and "evil" not in str(answer.headers)


async def test_an_unknown_host_is_refused_on_the_mcp_door_and_the_token_endpoint(client: httpx.AsyncClient,
                                                                                   factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    mcp = await client.post(PATH, json=INITIALIZE, headers={**JSON_AND_SSE, **ws.headers(host="evil.example.com")})
    assert mcp.status_code == 421 and mcp.json()["error"]["data"]["error"] == "misdirected_request"
    assert "evil" not in mcp.text and "evil" not in mcp.headers.get("www-authenticate", "")
    token = await client.post("/api/mcp/oauth/token/", data={"grant_type": "refresh_token", "refresh_token": "x"},
                              headers={"Host": "evil.example.com"})
    assert token.status_code == 421 and token.json()["error"] == "misdirected_request"


async def test_a_subdomain_that_is_not_a_tenant_is_404_everywhere_but_a_tenants_is_served(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for path in (*DISCOVERY, "/api/mcp/oauth/authorize/"):
        missing = await client.get(path, headers={"Host": "nosuchtenant-hosts.localhost"})
        assert missing.status_code == 404, (path, missing.text)
        assert "nosuchtenant-hosts.localhost/" not in missing.text  # no issuer, no link
    assert (await client.get(DISCOVERY[0], headers={"Host": "nosuchtenant-hosts.localhost"})).json()["error"] \
        == "tenant_not_found"
    served = (await client.get(DISCOVERY[0], headers={"Host": ws.host})).json()
    assert served["issuer"] == f"http://{ws.host}"


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1:8000", "[::1]:8000", "127.0.0.2", "LOCALHOST"])
async def test_loopback_names_are_the_platform_host(client: httpx.AsyncClient, host: str) -> None:
    doc = (await client.get(DISCOVERY[0], headers={"Host": host})).json()
    assert doc["issuer"] == f"http://{host.lower()}"


@pytest.mark.parametrize("host", ["[::1", "[::1]x", "::1", "localhost:99999", "localhost:0", "localhost:x",
                                  "localhost:\u00b2", "localhost:" + "9" * 5000])
async def test_a_malformed_host_is_421_and_never_makes_an_issuer(client: httpx.AsyncClient, host: str) -> None:
    """An unclosed bracket, an unbracketed IPv6 address or a port that is not 1 to 65535 names no host a URL can
    carry: refused like a missing Host, so no issuer or link is built from it."""
    for path in (DISCOVERY[0], "/api/mcp/oauth/authorize/", "/api/v1/dev/ping/"):
        answer = await client.get(path, headers=[(b"host", host.encode())])
        assert answer.status_code == 421, (path, answer.text)
        assert "issuer" not in answer.text


async def test_extra_hosts_are_served_and_health_answers_any_host(configured: httpx.AsyncClient,
                                                                  client: httpx.AsyncClient) -> None:
    doc = (await configured.get(DISCOVERY[0], headers={"Host": "prism.internal.example:9000"})).json()
    assert doc["issuer"] == "http://prism.internal.example:9000"
    assert (await configured.get(DISCOVERY[0], headers={"Host": "10.1.2.3"})).json()["issuer"] == "http://10.1.2.3"
    assert (await client.get(DISCOVERY[0], headers={"Host": "prism.internal.example"})).status_code == 421
    # A probe addresses the pod by its IP: health answers whatever the Host.
    assert (await client.get("/healthz", headers={"Host": "10.9.8.7:8000"})).status_code == 200


async def test_the_mcp_door_refuses_a_foreign_origin_and_takes_its_own_and_allowed_ones(
        client: httpx.AsyncClient, configured: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    headers = {**JSON_AND_SSE, **ws.headers()}
    foreign = await client.post(PATH, json=INITIALIZE, headers={**headers, "Origin": "https://evil.example.com"})
    assert foreign.status_code == 403 and foreign.json()["error"]["data"]["error"] == "origin_not_allowed"
    for origin in ("null", "https://evil.example.com:443/", f"http://{ws.host}.evil.example.com", "http://[::1",
                   "http://[localhost]", "http://localhost:99999"):
        refused = await client.post(PATH, json=INITIALIZE, headers={**headers, "Origin": origin})
        assert refused.status_code == 403, origin
    preflight = await client.options(PATH, headers={"Host": ws.host, "Origin": "https://evil.example.com",
                                                    "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 403
    own = await client.post(PATH, json=INITIALIZE, headers={**headers, "Origin": f"http://{ws.host}"})
    assert own.status_code == 200, own.text
    assert (await client.post(PATH, json=INITIALIZE, headers={**headers, "Origin": "https://inspector.example.com"})
            ).status_code == 403
    allowed = await configured.post(PATH, json=INITIALIZE, headers={**headers,
                                                                    "Origin": "https://inspector.example.com"})
    assert allowed.status_code == 200, allowed.text
    # Origin is checked on the MCP door only: the OAuth endpoints take any origin (CORS `*`).
    meta = await client.get(DISCOVERY[0], headers={"Host": ws.host, "Origin": "https://evil.example.com"})
    assert meta.status_code == 200


async def test_the_dns_rebinding_scenario_requests(client: httpx.AsyncClient, factory: Factory) -> None:
    """What the MCP conformance suite's dns-rebinding-protection scenario sends: an initialize with Host and
    Origin of an attacker's name (4xx), then with the server's own loopback address (accepted: the door goes on
    to authenticate the caller)."""
    ws = await factory.workspace(roles=("owner",))
    attacker = {**JSON_AND_SSE, "Host": "evil.example.com", "Origin": "http://evil.example.com"}
    assert 400 <= (await client.post(PATH, json=INITIALIZE, headers=attacker)).status_code < 500
    own = {**JSON_AND_SSE, "Host": "127.0.0.1:8000", "Origin": "http://127.0.0.1:8000"}
    anonymous = await client.post(PATH, json=INITIALIZE, headers=own)
    assert anonymous.status_code == 401  # past the host and origin checks, asked to sign in
    key = {"Authorization": f"Bearer {ws.keys['owner']}"}
    assert (await client.post(PATH, json=INITIALIZE, headers={**own, **key})).status_code == 200
