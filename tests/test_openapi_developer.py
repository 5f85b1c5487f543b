"""The developer descriptor: GET /.well-known/openapi.json on the portal host (OpenAPI 3.1.0)."""

from __future__ import annotations

from typing import Any

import httpx
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from starlette.routing import Route

from prism.openapi.developer import WEBHOOKS, developer_document
from prism.openapi.endpoints import ORIGINS_KEPT
from tests.factories import Factory
from tests.webhooks_fixtures import create_hook

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


def _served_webhook_operations(app: Any) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves under the webhooks API, as the descriptor writes the path
    (with its trailing slash); HEAD is GET's."""
    prefix = WEBHOOKS.rstrip("/")
    return {(method.lower(), route.path if route.path.endswith("/") else route.path + "/")
            for route in app.routes if isinstance(route, Route) and route.path.startswith(prefix)
            for method in (route.methods or set()) - {"HEAD"}}


async def test_every_served_webhook_route_is_in_the_descriptor(client: httpx.AsyncClient, app: Any) -> None:
    """Read from the routes themselves, so a route added later cannot be left out of the descriptor."""
    served = _served_webhook_operations(app)
    assert ("post", WEBHOOKS + "{webhook_id}/deliveries/{delivery_id}/resend/") in served
    paths = (await client.get(PATH, headers=PORTAL)).json()["paths"]
    published = {(method, path) for path, item in paths.items() for method in item}
    assert served - published == set()


async def test_a_test_event_and_a_resend_answer_as_the_descriptor_says(
        hook_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    doc = (await hook_client.get(PATH, headers=PORTAL)).json()
    responses = doc["paths"][WEBHOOKS + "{webhook_id}/deliveries/{delivery_id}/resend/"]["post"]["responses"]
    hook = await create_hook(hook_client, ws, "https://127.0.0.1:9/hook")
    sent = await hook_client.post(f"{WEBHOOKS}{hook['id']}/test/", headers=ws.headers())
    test_responses = doc["paths"][WEBHOOKS + "{webhook_id}/test/"]["post"]["responses"]
    assert sent.status_code == 202 and [s for s in test_responses if s.startswith("2")] == ["202"], sent.text
    resend = f"{WEBHOOKS}{hook['id']}/deliveries/{sent.json()['id']}/resend/"
    resent = await hook_client.post(resend, headers=ws.headers())
    assert resent.status_code == 202 and "202" in responses, resent.text
    Draft202012Validator(doc["components"]["schemas"]["Delivery"]).validate(resent.json())
    assert resent.json()["id"] != sent.json()["id"]
    for path, status in ((f"{WEBHOOKS}{hook['id']}/deliveries/del_unknown/resend/", 404),
                         (f"{WEBHOOKS}{hook['id']}/deliveries/{'d' * 65}/resend/", 400)):
        refused = await hook_client.post(path, headers=ws.headers())
        assert refused.status_code == status and str(status) in responses, refused.text
    other = await factory.workspace()  # another tenant's key on this tenant's host: not its webhook to resend
    stranger = await hook_client.post(resend, headers=other.headers(host=ws.host))
    assert stranger.status_code == 401 and "401" in responses, stranger.text


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
