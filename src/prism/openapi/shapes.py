"""Wire shapes of the dispatch doors, written in the dialect OpenAPI 3.0.3 understands.

They are also valid JSON Schema 2020-12 (no `nullable`), so the developer descriptor (3.1.0) reuses them.
"""

from __future__ import annotations

from typing import Any

from prism.kit.ids import GOVERNANCE_ID_LENGTH

ENVELOPE_SUCCESS_30: dict[str, Any] = {
    "type": "object",
    "description": "PrismResponse on success.",
    "required": ["success", "data", "tool_name"],
    "properties": {
        "success": {"type": "boolean", "enum": [True]},
        "data": {"description": "The tool result (for list operations: {items, page, page_size, total})."},
        "tool_name": {"type": "string"},
    },
}

ENVELOPE_ERROR_30: dict[str, Any] = {
    "type": "object",
    "description": "PrismResponse on failure.",
    "required": ["success", "error", "message", "tool_name"],
    "properties": {
        "success": {"type": "boolean", "enum": [False]},
        "error": {"type": "string", "description": "Machine code, for example tool_not_found."},
        "message": {"type": "string"},
        "tool_name": {"type": "string"},
        "details": {"$ref": "#/components/schemas/ErrorDetails"},
    },
}

# The one shape of a refusal's details on every door, described once (both descriptors carry it as the
# ErrorDetails component): every 400 lists its problems in `errors`; other refusals may add their own keys.
ERROR_DETAILS_30: dict[str, Any] = {
    "type": "object",
    "description": "Details of a refusal. Every 400 (invalid_arguments, invalid_body, invalid_json, ...) has "
                   "`errors`, one `{field, message}` per problem; `field` is the dotted path of the input at "
                   "fault, `arguments` (or `body`) when the whole input is. Other keys depend on the error.",
    "additionalProperties": True,
    "properties": {
        "errors": {
            "type": "array", "minItems": 1,
            "items": {"type": "object", "required": ["field", "message"], "additionalProperties": False,
                      "properties": {"field": {"type": "string"}, "message": {"type": "string"}}},
        },
    },
}


def envelope_request_30(envelope: dict[str, Any] | None) -> dict[str, Any]:
    """The body of a mega-tool door: the caller's own envelope schema (with the names it may call), or the
    generic one without names for anonymous readers."""
    if envelope is not None:
        return {**envelope, "properties": {**envelope["properties"], **_GOVERNANCE}}
    return {
        "type": "object",
        "required": ["app", "entity", "operation"],
        "additionalProperties": False,
        "properties": {
            "app": {"type": "string", "description": "App namespace."},
            "entity": {"type": "string", "description": "Entity within the app."},
            "operation": {"type": "string", "description": "Operation on the entity."},
            "arguments": {"type": "object", "description": "The handler's parameters."},
            **_GOVERNANCE,
        },
    }


_ID = {"type": "string", "minLength": 1, "maxLength": GOVERNANCE_ID_LENGTH}
_GOVERNANCE = {
    "mission_id": {**_ID, "description": "Optional: account the call's cost to this active mission."},
    "oversight_request_id": {**_ID, "description": "Optional: run a call a reviewer approved (from the 202)."},
}
