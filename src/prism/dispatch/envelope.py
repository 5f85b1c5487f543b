"""Turning what a door received into a dispatcher Call.

Mega-tool doors take `{operation, app, entity, arguments}`, or the same inside a `kwargs` envelope;
legacy tools (`prism_whoami`, `prism_introspect`) take flat parameters, or `{arguments: {...}}`.
"""

from __future__ import annotations

from typing import Any

from prism.dispatch.dispatcher import Call
from prism.errors import InvalidArguments
from prism.registry.mega_tools import LEGACY_BINDINGS

ENVELOPE_KEYS = frozenset({"operation", "app", "entity", "arguments", "mission_id"})


def call_from_envelope(tool_name: str, payload: Any, *, door: str) -> Call:
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidArguments("arguments: must be a JSON object", details={"field": "arguments"})
    if isinstance(payload.get("kwargs"), dict) and len(payload) == 1:
        payload = payload["kwargs"]
    if tool_name in LEGACY_BINDINGS:
        arguments = payload["arguments"] if set(payload) == {"arguments"} else payload
        return Call(tool_name=tool_name, door=door, arguments=arguments)
    unknown = sorted(set(payload) - ENVELOPE_KEYS)
    if unknown:
        raise InvalidArguments(f"{unknown[0]}: not an envelope field; send handler parameters inside "
                               "`arguments`", details={"field": unknown[0]})
    return Call(tool_name=tool_name, door=door, arguments=payload.get("arguments", {}),
                operation=payload.get("operation"), app=payload.get("app"), entity=payload.get("entity"))
