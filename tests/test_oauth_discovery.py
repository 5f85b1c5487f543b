"""Discovery documents on every host: every field of SPEC.md, the issuer built from the request host."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from prism.app import create_app
from prism.config import Settings
from tests.factories import Factory

AS_FIELDS = {"issuer", "authorization_endpoint", "token_endpoint", "revocation_endpoint", "registration_endpoint",
             "jwks_uri", "response_types_supported", "grant_types_supported", "code_challenge_methods_supported",
             "token_endpoint_auth_methods_supported", "scopes_supported", "response_modes_supported",
             "authorization_response_iss_parameter_supported", "mcp_version", "service_documentation",
             "mcp_sse_endpoint"}
OIDC_FIELDS = {"issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri",
               "response_types_supported", "grant_types_supported", "subject_types_supported"}
PR_FIELDS = {"resource", "authorization_servers", "scopes_supported", "bearer_methods_supported",
             "resource_signing_alg_values_supported", "resource_documentation", "authentication_methods_supported",
             "mcp_version", "platform_support", "mcp_sse_endpoint"}


async def test_authorization_server_metadata_has_every_field_and_fixed_value(client: httpx.AsyncClient,
                                                                            factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    doc = (await client.get("/.well-known/oauth-authorization-server", headers={"Host": ws.host})).json()
    assert AS_FIELDS <= set(doc)
    issuer = f"http://{ws.host}"
    assert doc["issuer"] == issuer
    assert all(doc[k].startswith(issuer + "/") for k in ("authorization_endpoint", "token_endpoint",
                                                          "revocation_endpoint", "registration_endpoint", "jwks_uri"))
    assert doc["response_types_supported"] == ["code"]
    assert doc["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert doc["code_challenge_methods_supported"] == ["S256"]
    # SPEC.md's list exactly (client_secret_basic is accepted at registration, not published).
    assert doc["token_endpoint_auth_methods_supported"] == ["none", "client_secret_post"]
    assert doc["revocation_endpoint_auth_methods_supported"] == ["none", "client_secret_post"]
    assert doc["client_id_metadata_document_supported"] is True
    assert "offline_access" in doc["scopes_supported"]
    assert doc["response_modes_supported"] == ["query"]
    assert doc["authorization_response_iss_parameter_supported"] is True
    assert doc["mcp_version"] == "2025-03-26"
    assert doc["mcp_sse_endpoint"] == issuer + "/api/mcp/sse"
    assert {"mcp:read", "mcp:write", "mcp:execute", "spare_parts.view"} <= set(doc["scopes_supported"])


async def test_openid_configuration_has_every_field(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/.well-known/openid-configuration", headers={"Host": "localhost:8000"})).json()
    assert OIDC_FIELDS <= set(doc)
    assert doc["issuer"] == "http://localhost:8000"
    assert doc["userinfo_endpoint"] == "http://localhost:8000/api/mcp/oauth/userinfo/"
    assert doc["subject_types_supported"] == ["public"]
    assert doc["token_endpoint_auth_methods_supported"] == ["none", "client_secret_post"]


async def test_a_registration_asking_for_client_secret_basic_is_accepted_though_not_published(
        client: httpx.AsyncClient) -> None:
    """Clients that do not read the metadata ask for client_secret_basic: registered as sent."""
    answer = await client.post("/api/mcp/oauth/register/", json={
        "client_name": "Basic reader", "redirect_uris": ["https://basic.example/cb"],
        "token_endpoint_auth_method": "client_secret_basic"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["token_endpoint_auth_method"] == "client_secret_basic"
    assert answer.json()["client_secret"].startswith("pcs_")


@pytest.mark.parametrize(("path", "resource"), [
    ("/.well-known/oauth-protected-resource", "http://localhost"),
    ("/.well-known/oauth-protected-resource/api/mcp/sse", "http://localhost/api/mcp/sse"),
])
async def test_protected_resource_metadata_has_every_field(client: httpx.AsyncClient, path: str,
                                                           resource: str) -> None:
    answer = await client.get(path)
    assert answer.status_code == 200
    doc = answer.json()
    assert PR_FIELDS <= set(doc)
    assert doc["resource"] == resource and doc["authorization_servers"] == ["http://localhost"]
    assert doc["scopes_supported"] == ["mcp:read", "mcp:write", "mcp:execute"]
    assert doc["bearer_methods_supported"] == ["header"]
    assert doc["resource_signing_alg_values_supported"] == ["RS256", "HS256"]
    assert doc["authentication_methods_supported"] == ["oauth2"]
    assert len(doc["platform_support"]) == 3


async def test_the_issuer_ignores_forwarded_headers(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/.well-known/oauth-authorization-server", headers={
        "Host": "localhost", "X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"})).json()
    assert doc["issuer"] == "http://localhost"
    assert "evil" not in str(doc)


async def test_the_issuer_is_byte_identical_across_documents(client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    headers = {"Host": f"{ws.host}:8443"}
    a = (await client.get("/.well-known/oauth-authorization-server", headers=headers)).json()
    o = (await client.get("/.well-known/openid-configuration", headers=headers)).json()
    p = (await client.get("/.well-known/oauth-protected-resource", headers=headers)).json()
    assert a["issuer"] == o["issuer"] == p["authorization_servers"][0] == f"http://{ws.host}:8443"


async def test_jwks_lists_rsa_signing_keys(client: httpx.AsyncClient) -> None:
    keys = (await client.get("/.well-known/jwks.json")).json()["keys"]
    assert keys
    for key in keys:
        assert {"kty", "kid", "use", "n", "e"} <= set(key)
        assert all(isinstance(key[k], str) for k in ("kty", "kid", "use", "n", "e"))
        assert key["kty"] == "RSA" and "d" not in key and "p" not in key


async def test_discovery_answers_cors_preflights_without_auth(client: httpx.AsyncClient) -> None:
    answer = await client.options("/.well-known/oauth-authorization-server",
                                  headers={"Origin": "https://x.example", "Access-Control-Request-Method": "GET"})
    assert answer.status_code == 204 and answer.headers["access-control-allow-origin"] == "*"
    got = await client.get("/.well-known/oauth-authorization-server")
    assert got.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize(("host", "documentation"), [
    ("localhost:8000", "http://portal.localhost:8000/"), ("localhost", "http://portal.localhost/"),
])
async def test_documentation_links_carry_the_port_the_issuer_names(client: httpx.AsyncClient, host: str,
                                                                   documentation: str) -> None:
    server = (await client.get("/.well-known/oauth-authorization-server", headers={"Host": host})).json()
    resource = (await client.get("/.well-known/oauth-protected-resource", headers={"Host": host})).json()
    assert server["service_documentation"] == resource["resource_documentation"] == documentation
    assert server["issuer"] == f"http://{host}"


async def test_documentation_links_follow_the_public_port(app: Any, settings: Settings) -> None:
    public = create_app(settings.model_copy(update={"public_scheme": "https", "public_port": 8443}),
                        registry=app.state.registry)
    async with public.router.lifespan_context(public):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=public), base_url="http://localhost") as c:
            doc = (await c.get("/.well-known/oauth-authorization-server")).json()
    assert doc["issuer"] == "https://localhost:8443"
    assert doc["service_documentation"] == "https://portal.localhost:8443/"
