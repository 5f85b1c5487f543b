"""Output schemas of MCP tools (2025-06-18 on): the success envelope a tool's structured content follows.

Every successful call answers `{success: true, data, tool_name}`. What `data` holds is published when every
handler behind the tool declares its result model (`result=` in HandlerApp.handler); otherwise `data` is left
open, which is still a true statement of the envelope.
"""

from __future__ import annotations

from typing import Any

from prism.registry.model import Handler

ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"success": {"const": True}, "data": {}, "tool_name": {"type": "string"}},
    "required": ["success", "data", "tool_name"],
}


def output_schema(handlers: list[Handler]) -> dict[str, Any]:
    """The envelope, with `data` described when all of `handlers` declare their results."""
    results = [h.result_schema for h in handlers]
    if not results or any(r is None for r in results):
        return ENVELOPE_SCHEMA
    definitions: dict[str, Any] = {}
    shapes: list[dict[str, Any]] = []
    for result in results:
        assert result is not None
        shape = {k: v for k, v in result.items() if k != "$defs"}
        # Pydantic's references point at the root's $defs ("#/$defs/Name"): the definitions move to the
        # envelope's root, which only works while two handlers never define one name differently.
        for name, definition in result.get("$defs", {}).items():
            if definitions.setdefault(name, definition) != definition:
                return ENVELOPE_SCHEMA
        if shape not in shapes:
            shapes.append(shape)
    data = shapes[0] if len(shapes) == 1 else {"anyOf": shapes}
    schema: dict[str, Any] = {**ENVELOPE_SCHEMA, "properties": {**ENVELOPE_SCHEMA["properties"], "data": data}}
    if definitions:
        schema["$defs"] = definitions
    return schema
