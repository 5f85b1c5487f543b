"""Prism's HTTP answers where SPEC.md states them explicitly: each test quotes SPEC in its docstring."""

from __future__ import annotations

import httpx
import pytest

from tests.factories import Factory
from tests.governance_support import governed_key

CANONICAL = "/api/mcp/tools/prism_entity_crud/"
PATH_LIST = "/prism/entity_crud/spare_parts/spare_part/list"
CALL = "/api/v1/dev/call/"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"


# --- sandbox call -----------------------------------------------------------------------------------------

async def test_sandbox_call_held_for_oversight_does_not_answer_an_error_body_with_a_2xx(
        client: httpx.AsyncClient, factory: Factory) -> None:
    """SPEC "Developer sandbox": "On success the body is the bare result with no success wrapper. On failure the
    body is `{error, tool_name}` with a non-2xx status." A call held for oversight did not run and answers
    `{error: oversight_required, message, tool_name, details}`; with 202 a client cannot tell it from a bare
    result (the only success signal on this endpoint is the 2xx status)."""
    ws = await factory.workspace(roles=("owner",))
    await governed_key(factory, client, ws, "agent", persona={
        "name": "gated", "default": "allow", "oversight": ["entity_crud/finance/vendor/create"]})
    answer = await client.post(CALL, headers=ws.headers("agent"), json={"name": "prism_entity_crud", "arguments": {
        "app": "finance", "entity": "vendor", "operation": "create", "arguments": {"name": "Acme"}}})
    body = answer.json()
    assert body.get("error") == "oversight_required", answer.text  # the call was held, not run
    assert not 200 <= answer.status_code < 300, (answer.status_code, body)


async def test_sandbox_call_tool_execution_error_is_400(client: httpx.AsyncClient, factory: Factory) -> None:
    """SPEC "Errors": "400 | ... on the call endpoint, also missing body, missing `name`, or tool execution error"
    and the call row lists "200 bare tool result; 400; 401; 404". A tool that fails while executing (a unique
    SKU already taken) answers 409 on /api/v1/dev/call/."""
    ws = await factory.workspace(roles=("owner",))
    body = {"name": "prism_entity_crud", "arguments": {"app": "spare_parts", "entity": "spare_part",
                                                       "operation": "create",
                                                       "arguments": {"sku": "SKU-1", "name": "Bolt"}}}
    first = await client.post(CALL, json=body, headers=ws.headers())
    assert first.status_code == 200, first.text
    again = await client.post(CALL, json=body, headers=ws.headers())
    assert set(again.json()) >= {"error", "tool_name"}, again.text
    assert again.status_code == 400, (again.status_code, again.text)


# --- canonical dispatch -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "tool_name"), [
    ("GET", CANONICAL, "prism_entity_crud"),
    ("PUT", CANONICAL, "prism_entity_crud"),
    ("DELETE", CANONICAL, "prism_entity_crud"),
    ("GET", PATH_LIST, "prism_entity_crud"),
])
async def test_canonical_paths_answer_the_envelope_on_a_wrong_method(
        client: httpx.AsyncClient, factory: Factory, method: str, path: str, tool_name: str) -> None:
    """SPEC "Canonical response envelope": "The envelope is returned on every branch, success and error alike";
    "Errors": "Canonical path: `{success: false, error: <code>, message, tool_name}`". A wrong method on the
    canonical paths answers the plain `{error, message}` (no `success`, no `tool_name`)."""
    ws = await factory.workspace(roles=("owner",))
    answer = await client.request(method, path, headers=ws.headers())
    assert answer.status_code == 405, answer.text
    body = answer.json()
    assert body.get("success") is False and body.get("tool_name") == tool_name, body
    assert body["error"] == "method_not_allowed" and isinstance(body["message"], str)


# --- API-key registration ---------------------------------------------------------------------------------

# --- OAuth ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", [
    {"grant_type": "authorization_code", "code": "pac_nothing", "code_verifier": "v" * 43},  # no client_id
    {"grant_type": "authorization_code", "code": "pac_nothing", "code_verifier": "v" * 43,
     "client_id": "prism-no-such-client", "client_secret": "pcs_wrong"},  # client_secret_post, unknown client
], ids=["missing-client-id", "unknown-client-post"])
async def test_token_endpoint_refuses_bad_client_credentials_with_400(client: httpx.AsyncClient,
                                                                       form: dict[str, str]) -> None:
    """SPEC "OAuth and keys": POST /api/mcp/oauth/token/ → "200 token response; 400 invalid grant or credentials";
    "Errors": "400 | ... on OAuth endpoints, invalid registration data, invalid grant or credentials". The client
    sends no Authorization header (RFC 6749 5.2 requires 401 only then). Prism answers 401 invalid_client."""
    answer = await client.post("/api/mcp/oauth/token/", data=form)
    assert answer.status_code == 400, (answer.status_code, answer.text)
    assert isinstance(answer.json()["error"], str)


# --- webhook management -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "params"), [
    (WEBHOOKS, {"page": "0"}),
    (WEBHOOKS, {"is_active": "maybe"}),
    (WEBHOOKS + "whk_anything/deliveries/", {"status": "SUCCESS"}),
])
async def test_webhook_lists_refuse_an_anonymous_caller_with_401_whatever_the_query(
        client: httpx.AsyncClient, factory: Factory, path: str, params: dict[str, str]) -> None:
    """SPEC "Webhook management": "Bearer token auth"; "Errors": "401 | Token missing, expired or invalid".
    A request with no credential and a bad query answers 400 naming Prism's validation rules (the create path
    already checks the caller first: "strangers learn nothing about its rules")."""
    ws = await factory.workspace(roles=("owner",))
    answer = await client.get(path, params=params, headers={"Host": ws.host})
    assert answer.status_code == 401, (answer.status_code, answer.text)
