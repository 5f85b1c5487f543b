"""JSON Schemas (2020-12) of the developer API's wire shapes, as SPEC.md and docs/ describe them.

Request bodies of webhook management come from the Pydantic models the webhook API validates with,
so the descriptor cannot drift from the validator; the rest is written out from the documented shapes.
"""

from __future__ import annotations

from typing import Any

from prism.kit.ids import GOVERNANCE_ID_LENGTH
from prism.openapi.shapes import ENVELOPE_ERROR_30, ENVELOPE_SUCCESS_30, ERROR_DETAILS_30

STR: dict[str, Any] = {"type": "string"}
NULLABLE_STR: dict[str, Any] = {"type": ["string", "null"]}
TIMESTAMP: dict[str, Any] = {"type": "string", "format": "date-time"}
NULLABLE_TIMESTAMP: dict[str, Any] = {"type": ["string", "null"], "format": "date-time"}
STR_LIST: dict[str, Any] = {"type": "array", "items": STR}
ORGANIZATION_ID: dict[str, Any] = {"type": "string", "pattern": "^org_[0-9a-f]{32}$",
                                   "description": "The organization's public id (the form webhook events carry)."}


def obj(properties: dict[str, Any], required: tuple[str, ...] | None = None, *,
        description: str | None = None, extra: bool = True) -> dict[str, Any]:
    """An object schema; every property is required unless `required` names the subset."""
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": list(properties if required is None else required)}
    if description:
        schema["description"] = description
    if not extra:
        schema["additionalProperties"] = False
    return schema


def paged(items: dict[str, Any], **named: dict[str, Any]) -> dict[str, Any]:
    """Prism's list envelope (prism.kit.paging) of `items`, with a door's own names for the same list."""
    integer = {"type": "integer", "minimum": 0}
    return obj({"items": {"type": "array", "items": items}, "page": {**integer, "minimum": 1},
                "page_size": {**integer, "minimum": 1}, "total": integer,
                **{name: schema for name, schema in named.items()}})


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: dict[str, dict[str, Any]] = {
    "ErrorDetails": ERROR_DETAILS_30,
    "Error": obj({"error": STR, "message": STR, "details": ref("ErrorDetails")}, ("error", "message"),
                 description="Sandbox, key registration and webhook errors: a machine code and a message."),
    "CallError": obj({"error": STR, "message": STR, "tool_name": NULLABLE_STR, "details": ref("ErrorDetails")},
                     ("error", "tool_name"), description="POST /api/v1/dev/call/ on failure."),
    "OAuthError": obj({"error": STR, "error_description": STR}, ("error",),
                      description="RFC 6749 error response."),
    "PrismSuccess": ENVELOPE_SUCCESS_30,
    "PrismError": ENVELOPE_ERROR_30,
    "Ping": obj({"service": STR, "version": STR, "status": STR, "build": STR}, ("service", "version", "status")),
    "Identity": obj({
        "authenticated": {"type": "boolean"},
        "key": obj({"prefix": STR, "name": STR, "created_at": TIMESTAMP, "last_used_at": NULLABLE_TIMESTAMP,
                    "scopes": STR_LIST}),
        "user": obj({"id": STR, "email": {"type": "string", "format": "email"}}),
        "organization": obj({"id": ORGANIZATION_ID, "name": STR, "role": STR}, ("id",)),
        "tenant": obj({"id": STR, "name": NULLABLE_STR, "subdomain": NULLABLE_STR}),
    }, ("authenticated", "key", "user", "tenant")),
    "ToolDescriptor": obj({"name": STR, "description": STR, "category": NULLABLE_STR,
                           "parameters": {"type": "object"}, "handler_count": {"type": "integer"}},
                          ("name", "description", "category", "parameters")),
    "ToolCatalog": paged(ref("ToolDescriptor"), tools={"type": "array", "items": ref("ToolDescriptor")},
                         count={"type": "integer"}),
    "CallRequest": obj({"name": {"type": "string", "minLength": 1},
                        "arguments": {"type": "object", "default": {}}}, ("name",), extra=False),
    "ToolEnvelope": obj({"app": STR, "entity": STR, "operation": STR, "arguments": {"type": "object"},
                         "mission_id": {"type": "string", "minLength": 1, "maxLength": GOVERNANCE_ID_LENGTH},
                         "oversight_request_id": {"type": "string", "minLength": 1,
                                                  "maxLength": GOVERNANCE_ID_LENGTH}},
                        ("app", "entity", "operation"), extra=False),
    "ClientRegistrationRequest": obj({
        "client_id": {"type": "string", "description": "Requested id, for known clients."},
        "client_name": STR, "redirect_uris": {"type": "array", "items": {"type": "string", "format": "uri"}},
        "grant_types": {"type": "array", "items": {"enum": ["authorization_code", "refresh_token"]},
                        "default": ["authorization_code"]},
        "token_endpoint_auth_method": {"enum": ["none", "client_secret_post", "client_secret_basic"]},
        "scope": STR,
    }, ("redirect_uris",)),
    "ClientRegistration": obj({
        "client_id": STR, "client_secret": {"type": "string", "description": "Returned only on creation."},
        "client_name": STR, "redirect_uris": STR_LIST, "grant_types": STR_LIST,
        "token_endpoint_auth_method": STR,
        "registration_client_uri": {"type": "string", "format": "uri",
                                    "description": "Where the client reads, updates and deletes it (RFC 7592)."},
        "registration_access_token": {"type": "string",
                                      "description": "Bearer token for registration_client_uri; on creation only."},
    }, ("client_id", "client_name", "redirect_uris", "grant_types")),
    "TokenRequest": obj({
        "grant_type": {"enum": ["authorization_code", "refresh_token"]}, "code": STR, "code_verifier": STR,
        "redirect_uri": STR, "refresh_token": STR, "client_id": STR, "client_secret": STR,
    }, ("grant_type",)),
    "TokenResponse": obj({"access_token": STR, "refresh_token": NULLABLE_STR, "token_type": STR,
                          "expires_in": {"type": "integer"}, "scope": STR},
                         ("access_token", "token_type", "expires_in")),
    "RevokeRequest": obj({"token": STR, "token_type_hint": STR, "client_id": STR, "client_secret": STR},
                         ("token",)),
    "KeyRegistrationRequest": obj({
        "email": {"type": "string", "format": "email"}, "password": {"type": "string", "format": "password"},
        "name": STR, "organization": {"type": "string", "description": "Organization id (org_<hex>, or the UUID) "
                                                                    "or slug (optional)."},
    }, ("email", "password")),
    "KeyRegistration": obj({
        "api_key": {"type": "string", "description": "Plaintext, returned once."},
        "key_id": {"type": "string", "format": "uuid"}, "key_prefix": STR, "name": STR,
        "organization": ORGANIZATION_ID, "organization_name": STR,
        "expires_at": NULLABLE_TIMESTAMP,
    }),
    "Webhook": obj({
        "id": {"type": "string", "pattern": "^whk_"}, "name": STR, "description": NULLABLE_STR, "url": STR,
        "events": STR_LIST, "filters": {"type": ["object", "null"]},
        "custom_headers": {"type": ["object", "null"], "additionalProperties": STR},
        "max_retries": {"type": "integer"}, "retry_delay_seconds": {"type": "integer"},
        "timeout_seconds": {"type": "integer"}, "is_active": {"type": "boolean"}, "created_at": TIMESTAMP,
        "secret": {"type": "string", "description": "whk_secret_…; returned at creation only."},
    }, ("id", "name", "url", "events", "is_active", "created_at")),
    "WebhookList": paged(ref("Webhook"), count={"type": "integer"},
                         results={"type": "array", "items": ref("Webhook")}),
    "Delivery": obj({
        "id": {"type": "string", "pattern": "^del_"}, "event_type": STR, "event_id": STR,
        "status": {"enum": ["pending", "retrying", "success", "failed"]},
        "response_status_code": {"type": ["integer", "null"]}, "response_body": NULLABLE_STR,
        "error_message": NULLABLE_STR, "attempt_count": {"type": "integer"}, "created_at": TIMESTAMP,
        "delivered_at": NULLABLE_TIMESTAMP, "next_retry_at": NULLABLE_TIMESTAMP, "is_test": {"type": "boolean"},
    }, ("id", "event_type", "event_id", "status", "attempt_count", "created_at")),
    "DeliveryList": paged(ref("Delivery"), count={"type": "integer"},
                          results={"type": "array", "items": ref("Delivery")}),
    "OpenIDConfiguration": obj({k: {"type": "string", "format": "uri"} for k in (
        "issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")} | {
        k: STR_LIST for k in ("response_types_supported", "grant_types_supported", "subject_types_supported")}),
    "JWKS": obj({"keys": {"type": "array", "items": obj({k: STR for k in ("kty", "kid", "use", "n", "e")})}}),
    "AuthorizationServerMetadata": obj({
        **{k: STR for k in ("issuer", "authorization_endpoint", "token_endpoint", "revocation_endpoint",
                            "registration_endpoint", "jwks_uri", "mcp_version", "service_documentation",
                            "mcp_sse_endpoint")},
        **{k: STR_LIST for k in ("response_types_supported", "grant_types_supported",
                                 "code_challenge_methods_supported", "token_endpoint_auth_methods_supported",
                                 "scopes_supported", "response_modes_supported")},
        "authorization_response_iss_parameter_supported": {"type": "boolean"},
    }, ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri", "response_types_supported")),
    "OpenAPIDocument": obj({"openapi": STR, "info": {"type": "object"}, "paths": {"type": "object"}},
                           ("openapi", "info", "paths")),
}


def introspect_request_schema() -> dict[str, Any]:
    """The introspection parameters from the validator's own model: what the descriptor says is what is accepted
    (an optional filter may be sent as null, meaning none)."""
    from prism.registry.introspect import IntrospectParams

    schema = _clean(IntrospectParams.model_json_schema())
    schema["description"] = "Introspection parameters; all optional (dimension defaults to mega_tools)."
    return schema


def webhook_request_schemas() -> dict[str, dict[str, Any]]:
    """WebhookCreate / WebhookUpdate from the validator's own models (their $defs inlined by Pydantic)."""
    from prism.webhooks.schemas import WebhookCreate, WebhookUpdate

    return {model.__name__: _clean(model.model_json_schema()) for model in (WebhookCreate, WebhookUpdate)}


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for sub in schema.get("properties", {}).values():
        sub.pop("title", None)
    return schema
