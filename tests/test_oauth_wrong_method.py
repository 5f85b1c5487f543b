"""A method an OAuth endpoint or discovery document does not answer: 405 with `Allow`, in the shape of that
endpoint's other refusals and with the CORS headers its other answers carry (Starlette's router raises the
405; the app's handler renders it through the door of the path)."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import Factory
from tests.oauth_support import OAUTH, browser, register

OAUTH_SHAPE = {"error", "error_description"}
PLAIN_SHAPE = {"error", "message"}


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("GET", f"{OAUTH}/token/", {"POST", "OPTIONS"}),
    ("PUT", f"{OAUTH}/token", {"POST", "OPTIONS"}),
    ("GET", f"{OAUTH}/register/", {"POST", "OPTIONS"}),
    ("DELETE", f"{OAUTH}/revoke/", {"POST", "OPTIONS"}),
    ("DELETE", f"{OAUTH}/userinfo/", {"GET", "HEAD", "POST", "OPTIONS"}),
    ("GET", "/token", {"POST", "OPTIONS"}),
    ("PATCH", "/register/", {"POST", "OPTIONS"}),
])
async def test_an_oauth_endpoint_answers_a_wrong_method_in_rfc6749_shape_with_cors(
        client: httpx.AsyncClient, method: str, path: str, allowed: set[str]) -> None:
    answer = await client.request(method, path)
    assert answer.status_code == 405, answer.text
    body = answer.json()
    assert set(body) == OAUTH_SHAPE and body["error"] == "invalid_request", body
    assert method in body["error_description"]
    assert {m.strip() for m in answer.headers["allow"].split(",")} == allowed
    assert answer.headers["access-control-allow-origin"] == "*", answer.headers
    assert "POST" in answer.headers["access-control-allow-methods"]
    # A client running in a page reads which methods the endpoint answers.
    assert "Allow" in answer.headers["access-control-expose-headers"].split(", ")


@pytest.mark.parametrize("path", ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
                                  "/.well-known/jwks.json", "/.well-known/oauth-protected-resource",
                                  "/.well-known/oauth-protected-resource/api/mcp/sse"])
async def test_a_discovery_document_answers_a_wrong_method_in_its_shape_with_cors(client: httpx.AsyncClient,
                                                                                  path: str) -> None:
    answer = await client.post(path, json={})
    assert answer.status_code == 405, answer.text
    body = answer.json()
    assert set(body) == PLAIN_SHAPE and body["error"] == "method_not_allowed", body  # as its 404 tenant_not_found
    assert {m.strip() for m in answer.headers["allow"].split(",")} == {"GET", "HEAD", "OPTIONS"}
    assert answer.headers["access-control-allow-origin"] == "*", answer.headers


async def test_the_registration_management_endpoint_answers_a_wrong_method_with_its_cors(
        app: object, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with browser(app, ws.host) as c:
        client = await register(c, {"client_name": "managed", "redirect_uris": ["https://app.example.com/cb"],
                                    "token_endpoint_auth_method": "none"})
        answer = await c.post(client["registration_client_uri"], json={})
    assert answer.status_code == 405, answer.text
    assert set(answer.json()) == OAUTH_SHAPE and answer.json()["error"] == "invalid_request"
    assert {m.strip() for m in answer.headers["allow"].split(",")} == {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["access-control-allow-methods"] == "GET, PUT, DELETE, OPTIONS"
    assert {"Allow", "WWW-Authenticate"} <= set(answer.headers["access-control-expose-headers"].split(", "))


@pytest.mark.parametrize("path", [f"{OAUTH}/authorize/", "/authorize"])
async def test_the_authorize_endpoint_answers_a_wrong_method_in_rfc6749_shape(client: httpx.AsyncClient,
                                                                              path: str) -> None:
    """No browser sends it (a browser only GETs and POSTs the page): the program that did reads JSON."""
    answer = await client.put(path)
    assert answer.status_code == 405, answer.text
    assert set(answer.json()) == OAUTH_SHAPE and answer.json()["error"] == "invalid_request"
    assert "GET" in answer.headers["allow"]


async def test_a_refusal_of_the_edge_on_the_token_endpoint_carries_its_cors(client: httpx.AsyncClient) -> None:
    answer = await client.post(f"{OAUTH}/token/", data={"grant_type": "refresh_token", "refresh_token": "x"},
                               headers={"Host": "evil.example.com"})
    assert answer.status_code == 421
    assert set(answer.json()) == OAUTH_SHAPE and answer.json()["error"] == "misdirected_request"
    assert answer.headers["access-control-allow-origin"] == "*"
