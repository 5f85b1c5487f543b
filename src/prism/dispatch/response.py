"""The PrismResponse envelope (SPEC.md "Canonical response envelope"), built here alone.

The canonical doors answer it as their body; the MCP door returns it as the text of a tool result.
"""

from __future__ import annotations

from typing import Any

from prism.errors import PrismError


def success_envelope(data: Any, tool_name: str) -> dict[str, Any]:
    return {"success": True, "data": data, "tool_name": tool_name}


def failure_envelope(error: PrismError, tool_name: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"success": False, "error": error.code, "message": error.message, "tool_name": tool_name}
    if error.details:
        body["details"] = error.details
    return body
