"""The developer descriptor (portal host): OpenAPI 3.1.0 of the sandbox, canonical dispatch, OAuth, key
registration, webhook management and discovery endpoints.

It is live: an operation is published only when this deployment routes its method and path, so the
document never promises an endpoint the server does not answer (and the contract fuzzing proves the rest).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import orjson
from starlette.routing import BaseRoute, Match

from prism.kit.ids import GOVERNANCE_ID_LENGTH
from prism.openapi.developer_shapes import SCHEMAS, introspect_request_schema, ref, webhook_request_schemas

OPENAPI_VERSION = "3.1.0"
INFO_VERSION = "1.0.0"
WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/"
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
PUBLIC: list[dict[str, list[str]]] = []  # `security: []`: no credential needed


def _json(schema: dict[str, Any], description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {JSON: {"schema": schema}}}
    if headers:
        response["headers"] = headers
    return response


RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}}


def _errors(schema: str, *statuses: int) -> dict[str, Any]:
    texts = {202: "Held for human oversight (oversight_required).",
             400: "Bad request.", 401: "Missing or invalid credential.", 403: "Permission denied.",
             404: "Not found.", 409: "Conflict.", 413: "Body over 1 MiB.", 503: "Transient failure; retry."}
    out = {str(s): _json(ref(schema), texts[s]) for s in statuses}
    out["429"] = _json(ref(schema), "Rate limit reached.", RETRY_AFTER)
    return out


# me/ and introspect/ ask for no scope (a key may always learn who it is and what it may call): their 403 is
# never for want of one.
_SELF_DESCRIPTION_403 = _json(ref("Error"), "A persona on the credential refuses it (blocked), or an OAuth token's "
                                            "grant chose no organization (session_incomplete); never a missing "
                                            "scope.")


def _self_description_errors(*statuses: int) -> dict[str, Any]:
    out = _errors("Error", *sorted((*statuses, 403)))
    out["403"] = _SELF_DESCRIPTION_403
    return out


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _path(name: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


def _body(schema: dict[str, Any], media: str = JSON, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {media: {"schema": schema}}}


def _op(op_id: str, tag: str, summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"operationId": op_id, "tags": [tag], "summary": summary, "responses": responses, **extra}


def _query_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema as a query string carries it: a value, never null."""
    branches = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default") or (k == "default" and v is not None)}
    return {**rest, **branches[0]} if branches else rest


_INTROSPECT_SUMMARY = "Explore the handlers this key may call (any valid key, whatever its scopes)"
_INTROSPECT_PARAMS = [_query(name, _query_schema(schema))
                      for name, schema in introspect_request_schema()["properties"].items()]
_PAGE = [_query("page", {"type": "integer", "minimum": 1, "default": 1}),
         _query("page_size", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20})]
_ANY_JSON = {"description": "A JSON value."}
_ID = {"type": "string", "minLength": 1, "maxLength": GOVERNANCE_ID_LENGTH}
_GOVERNANCE_HEADERS = [
    {"name": "X-Prism-Mission", "in": "header", "required": False, "schema": _ID,
     "description": "Account the call's cost to this active mission."},
    {"name": "X-Prism-Oversight-Request", "in": "header", "required": False, "schema": _ID,
     "description": "Run a call that a reviewer approved (the id from the 202 answer)."}]


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) for every endpoint of the developer API."""
    sandbox, dispatch, oauth, keys, hooks, discovery = (
        "sandbox", "dispatch", "oauth", "api_keys", "webhooks", "discovery")
    webhook_id, delivery_id = _path("webhook_id", "whk_…"), _path("delivery_id", "del_…")
    return [
        ("get", "/api/v1/dev/ping/", _op("ping", sandbox, "Service liveness and API version.", {
            "200": _json(ref("Ping"), "The service answers."), **_errors("Error")}, security=PUBLIC)),
        ("get", "/api/v1/dev/me/", _op("me", sandbox, "Who is calling (any valid key, whatever its scopes).", {
            "200": _json(ref("Identity"), "The caller's identity."), **_self_description_errors(400, 401)})),
        ("get", "/api/v1/dev/tools/", _op("list_tools", sandbox, "The tools this key may call.", {
            "200": _json(ref("ToolCatalog"), "The catalog."), **_errors("Error", 400, 401)},
            parameters=[_query("category", {"type": "string"}), _query("search", {"type": "string"},
                                                                        "Case-insensitive substring of names."),
                        *_PAGE])),
        ("get", "/api/v1/dev/introspect/", _op("introspect", sandbox, _INTROSPECT_SUMMARY, {
            "200": _json({"type": "object"}, "The requested dimension."),
            **_self_description_errors(400, 401, 404)}, parameters=_INTROSPECT_PARAMS)),
        ("post", "/api/v1/dev/introspect/", _op("introspect_post", sandbox, _INTROSPECT_SUMMARY + " (JSON body)", {
            "200": _json({"type": "object"}, "The requested dimension."),
            **_self_description_errors(400, 401, 404, 413)},
            requestBody=_body(ref("IntrospectRequest"), required=False))),
        ("post", "/api/v1/dev/call/", _op("call", sandbox, "Call a tool; the bare result on success.", {
            "200": _json(_ANY_JSON, "The tool result, unwrapped."),
            **_errors("CallError", 400, 401, 403, 404, 413, 503)}, parameters=_GOVERNANCE_HEADERS,
            requestBody=_body(ref("CallRequest")))),
        ("post", "/api/mcp/tools/{tool_name}/", _op("call_tool", dispatch, "Canonical dispatch through a door.", {
            "200": _json(ref("PrismSuccess"), "The tool result in the envelope."),
            **_errors("PrismError", 202, 400, 401, 403, 404, 409, 413, 503)},
            parameters=[_path("tool_name", "prism_<mega_tool>, prism_whoami or prism_introspect"),
                        *_GOVERNANCE_HEADERS],
            requestBody=_body(ref("ToolEnvelope")))),
        ("post", "/prism/{mega_tool}/{app}/{entity}/{operation}", _op(
            "call_coordinate", dispatch, "One handler by coordinate; the handler's parameters as body.", {
                "200": _json(ref("PrismSuccess"), "The tool result in the envelope."),
                **_errors("PrismError", 202, 400, 401, 403, 404, 409, 413, 503)},
            parameters=[_path("mega_tool"), _path("app"), _path("entity"), _path("operation"), *_GOVERNANCE_HEADERS],
            requestBody=_body({"type": "object"}, required=False))),
        ("post", "/api/mcp/oauth/register/", _op("register_client", oauth, "Dynamic Client Registration (RFC 7591).", {
            "201": _json(ref("ClientRegistration"), "Registered; client_secret is shown this once."),
            "200": _json(ref("ClientRegistration"), "The same registration already exists."),
            **_errors("OAuthError", 400, 413)}, security=PUBLIC, requestBody=_body(ref("ClientRegistrationRequest")))),
        ("get", "/api/mcp/oauth/authorize/", _op("authorize", oauth, "Authorization-code flow (browser, PKCE S256).", {
            "200": {"description": "Login or consent page (HTML), or the code page for the oob redirect.",
                    "content": {"text/html": {"schema": {"type": "string"}}}},
            "302": {"description": "Redirect to redirect_uri with code, state and iss (or error)."},
            "303": {"description": "Redirect to the login page."},
            "400": {"description": "Invalid request that cannot be redirected.",
                    "content": {"text/html": {"schema": {"type": "string"}}, JSON: {"schema": ref("OAuthError")}}}},
            security=PUBLIC, parameters=[_query(n, {"type": "string"}) for n in (
                "response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "scope",
                "state")])),
        ("post", "/api/mcp/oauth/token/", _op("token", oauth, "Exchange a code or refresh token.", {
            "200": _json(ref("TokenResponse"), "Tokens."), **_errors("OAuthError", 400, 401, 413)},
            security=PUBLIC, requestBody=_body(ref("TokenRequest"), FORM))),
        ("post", "/api/mcp/oauth/revoke/", _op("revoke", oauth, "Revoke an access or refresh token (RFC 7009).", {
            "200": {"description": "Revoked, or the token was unknown (RFC 7009 2.2)."},
            **_errors("OAuthError", 400, 401, 413)}, security=PUBLIC, requestBody=_body(ref("RevokeRequest"), FORM))),
        ("post", "/api/mcp/api-keys/register/", _op("register_key", keys, "Trade email and password for a key.", {
            "201": _json(ref("KeyRegistration"), "The key; api_key is shown this once."),
            **_errors("Error", 400, 401, 403, 404, 413)}, security=PUBLIC,
            requestBody=_body(ref("KeyRegistrationRequest")))),
        ("post", WEBHOOKS, _op("create_webhook", hooks, "Create a webhook.", {
            "201": _json(ref("Webhook"), "Created; the secret is shown."), **_errors("Error", 400, 401, 403, 409, 413)},
            requestBody=_body(ref("WebhookCreate")))),
        ("get", WEBHOOKS, _op("list_webhooks", hooks, "List webhooks.", {
            "200": _json(ref("WebhookList"), "A page of webhooks."), **_errors("Error", 400, 401, 403)},
            parameters=[*_PAGE, _query("is_active", {"type": "boolean"}), _query("name", {"type": "string"})])),
        ("get", WEBHOOKS + "{webhook_id}/", _op("get_webhook", hooks, "One webhook.", {
            "200": _json(ref("Webhook"), "The webhook."), **_errors("Error", 401, 403, 404)},
            parameters=[webhook_id])),
        ("patch", WEBHOOKS + "{webhook_id}/", _op("update_webhook", hooks, "Change a webhook.", {
            "200": _json(ref("Webhook"), "The updated webhook."), **_errors("Error", 400, 401, 403, 404, 409, 413)},
            parameters=[webhook_id], requestBody=_body(ref("WebhookUpdate")))),
        ("delete", WEBHOOKS + "{webhook_id}/", _op("delete_webhook", hooks, "Delete a webhook.", {
            "204": {"description": "Deleted."}, **_errors("Error", 401, 403, 404)}, parameters=[webhook_id])),
        ("get", WEBHOOKS + "{webhook_id}/deliveries/", _op("list_deliveries", hooks, "Delivery history.", {
            "200": _json(ref("DeliveryList"), "A page of deliveries."), **_errors("Error", 400, 401, 403, 404)},
            parameters=[webhook_id, *_PAGE, _query("status", {"enum": ["pending", "retrying", "success", "failed"]}),
                        _query("event_type", {"type": "string"})])),
        ("get", WEBHOOKS + "{webhook_id}/deliveries/{delivery_id}/", _op("get_delivery", hooks, "One delivery.", {
            "200": _json(ref("Delivery"), "The delivery."), **_errors("Error", 401, 403, 404)},
            parameters=[webhook_id, delivery_id])),
        ("post", WEBHOOKS + "{webhook_id}/test/", _op("test_webhook", hooks, "Send a test event.", {
            "202": _json(ref("Delivery"), "The test delivery, queued."),
            **_errors("Error", 401, 403, 404, 409)}, parameters=[webhook_id])),
        ("post", WEBHOOKS + "{webhook_id}/deliveries/{delivery_id}/resend/", _op(
            "resend_delivery", hooks, "Send a delivery's event again: a new delivery (same bytes, fresh signature and "
            "id); the original stays.", {
                "202": _json(ref("Delivery"), "The new delivery, queued."),
                **_errors("Error", 400, 401, 403, 404, 409)}, parameters=[webhook_id, delivery_id])),
        ("get", "/.well-known/openapi.json", _op("tenant_descriptor", discovery, "This host's OpenAPI descriptor.", {
            "200": _json(ref("OpenAPIDocument"), "The descriptor; carries an ETag."),
            "304": {"description": "Not modified (If-None-Match)."}, **_errors("Error", 401, 404)}, security=PUBLIC)),
        ("get", "/.well-known/oauth-authorization-server", _op("as_metadata", discovery, "RFC 8414 metadata.", {
            "200": _json(ref("AuthorizationServerMetadata"), "Metadata.")}, security=PUBLIC)),
        ("get", "/.well-known/openid-configuration", _op("openid_configuration", discovery, "OpenID configuration.", {
            "200": _json(ref("OpenIDConfiguration"), "Configuration.")}, security=PUBLIC)),
        ("get", "/.well-known/jwks.json", _op("jwks", discovery, "Token signing keys.", {
            "200": _json(ref("JWKS"), "The JWKS.")}, security=PUBLIC)),
        ("get", "/.well-known/oauth-protected-resource", _op("protected_resource", discovery,
                                                             "RFC 9728 protected-resource metadata.", {
            "200": _json({"type": "object", "required": ["resource", "authorization_servers"]}, "Metadata.")},
            security=PUBLIC)),
    ]


def _routed(routes: Iterable[BaseRoute], method: str, path: str) -> bool:
    concrete = path.replace("{", "x").replace("}", "")  # any value fills a path parameter
    scope = {"type": "http", "method": method.upper(), "path": concrete, "root_path": ""}
    return any(route.matches(scope)[0] == Match.FULL for route in routes)


def developer_document(routes: Iterable[BaseRoute], server_url: str) -> dict[str, Any]:
    route_list = list(routes)
    paths: dict[str, dict[str, Any]] = {}
    for method, path, operation in operations():
        if _routed(route_list, method, path):
            paths.setdefault(path, {})[method] = operation
    schemas = {**SCHEMAS, "IntrospectRequest": introspect_request_schema()}
    if any(p.startswith(WEBHOOKS) for p in paths):
        schemas.update(webhook_request_schemas())
    tags = sorted({op["tags"][0] for item in paths.values() for op in item.values()})
    return {
        "openapi": OPENAPI_VERSION,
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "info": {"title": "Prism developer API", "version": INFO_VERSION,
                 "description": "Sandbox, canonical dispatch, OAuth 2.1, key registration, webhook management "
                                "and discovery. Tenant endpoints live on <tenant>.<base domain>; with an API key "
                                "the platform host works too (the key's organization decides the tenant)."},
        "servers": [{"url": server_url}],
        "tags": [{"name": t} for t in tags],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer",
                                               "description": "API key (ck_/mcp_) or OAuth access token."}},
            "schemas": schemas,
        },
    }


def serialized(document: dict[str, Any]) -> tuple[bytes, str]:
    body = orjson.dumps(document)
    return body, '"' + hashlib.sha256(body).hexdigest()[:40] + '"'
