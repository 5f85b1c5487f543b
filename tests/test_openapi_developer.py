"""The developer descriptor: GET /.well-known/openapi.json on the portal host (OpenAPI 3.1.0)."""

from __future__ import annotations

from typing import Any

import httpx
from openapi_spec_validator import validate

from prism.openapi.developer import WEBHOOKS, developer_document
from prism.openapi.tenant import ORIGINS_KEPT

PATH = "/.well-known/openapi.json"
PORTAL = {"Host": "portal.localhost"}


async def test_portal_serves_the_developer_descriptor_in_openapi_310(client: httpx.AsyncClient) -> None:
    response = await client.get(PATH, headers=PORTAL)
    assert response.status_code == 200
    doc = response.json()
    validate(doc)
    assert doc["openapi"] == "3.1.0" and doc["info"]["version"] == "1.0.0"
    assert doc["servers"] == [{"url": "http://portal.localhost"}]
    paths = doc["paths"]
    for path in ("/api/v1/dev/ping/", "/api/v1/dev/me/", "/api/v1/dev/tools/", "/api/v1/dev/introspect/",
                 "/api/v1/dev/call/", "/api/mcp/tools/{tool_name}/", "/prism/{mega_tool}/{app}/{entity}/{operation}",
                 "/api/mcp/oauth/register/", "/api/mcp/oauth/authorize/", "/api/mcp/oauth/token/",
                 "/api/mcp/oauth/revoke/", "/api/mcp/api-keys/register/", WEBHOOKS, WEBHOOKS + "{webhook_id}/",
                 WEBHOOKS + "{webhook_id}/deliveries/", WEBHOOKS + "{webhook_id}/deliveries/{delivery_id}/",
                 "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
                 "/.well-known/jwks.json"):
        assert path in paths, path
    assert set(paths["/api/v1/dev/introspect/"]) == {"get", "post"}
    assert set(paths[WEBHOOKS + "{webhook_id}/"]) == {"get", "patch", "delete"}
    assert paths["/api/v1/dev/ping/"]["get"]["security"] == []
    token = paths["/api/mcp/oauth/token/"]["post"]["requestBody"]["content"]
    assert "application/x-www-form-urlencoded" in token


async def test_request_and_error_schemas_are_the_real_ones(client: httpx.AsyncClient) -> None:
    doc = (await client.get(PATH, headers=PORTAL)).json()
    schemas: dict[str, Any] = doc["components"]["schemas"]
    # Webhook bodies come from the validator's own Pydantic models.
    create = schemas["WebhookCreate"]
    assert create["required"] == ["name", "url"] and create["properties"]["name"]["maxLength"] == 255
    assert create["additionalProperties"] is False
    assert schemas["KeyRegistration"]["required"] == [
        "api_key", "key_id", "key_prefix", "name", "organization", "organization_name", "expires_at"]
    assert schemas["PrismError"]["required"] == ["success", "error", "message", "tool_name"]
    call = doc["paths"]["/api/v1/dev/call/"]["post"]["responses"]
    assert call["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/CallError"}
    assert "Retry-After" in call["429"]["headers"]


async def test_developer_descriptor_revalidates_with_its_etag(client: httpx.AsyncClient) -> None:
    first = await client.get(PATH, headers=PORTAL)
    again = await client.get(PATH, headers={**PORTAL, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.headers["etag"] == first.headers["etag"]


async def test_only_endpoints_this_deployment_routes_are_published(app: Any) -> None:
    without_webhooks = [r for r in app.routes if not getattr(r, "path", "").startswith(WEBHOOKS.rstrip("/"))]
    doc = developer_document(without_webhooks, "http://portal.localhost")
    validate(doc)
    assert not any(p.startswith(WEBHOOKS) for p in doc["paths"])
    assert "WebhookCreate" not in doc["components"]["schemas"]
    assert "/api/v1/dev/me/" in doc["paths"]


async def test_tenant_hosts_keep_the_tenant_descriptor(client: httpx.AsyncClient) -> None:
    doc = (await client.get(PATH, headers={"Host": "localhost"})).json()
    assert doc["openapi"] == "3.0.3"


async def test_the_portal_keeps_a_few_origins_documents_whatever_ports_hosts_name(
        client: httpx.AsyncClient, app: Any) -> None:
    """The Host header is the client's: each port it names is an origin with a document of its own, and a process
    keeps at most ORIGINS_KEPT of them (anonymous requests over many ports grew the memory without end)."""
    for port in range(2000, 2040):
        response = await client.get(PATH, headers={"Host": f"portal.localhost:{port}"})
        assert response.status_code == 200 and response.json()["servers"][0]["url"].endswith(f":{port}")
    assert 0 < len(app.state.developer_descriptors) <= ORIGINS_KEPT
