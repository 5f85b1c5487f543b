"""Wire shapes of the dispatch doors, written in the dialect OpenAPI 3.0.3 understands.

They are also valid JSON Schema 2020-12 (no `nullable`), so the developer descriptor (3.1.0) reuses them.
"""

from __future__ import annotations

from typing import Any

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
        "details": {"type": "object", "additionalProperties": True,
                    "description": "For invalid_arguments: errors[].field names each field."},
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


_ID = {"type": "string", "minLength": 1, "maxLength": 64}
_GOVERNANCE = {
    "mission_id": {**_ID, "description": "Optional: account the call's cost to this active mission."},
    "oversight_request_id": {**_ID, "description": "Optional: run a call a reviewer approved (from the 202)."},
}
