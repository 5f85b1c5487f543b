"""Turning what a door received into a dispatcher Call.

Mega-tool doors take `{operation, app, entity, arguments}`, or the same inside a `kwargs` envelope;
legacy tools (`prism_whoami`, `prism_introspect`) take flat parameters, or `{arguments: {...}}`; both kinds take
`mission_id` and `oversight_request_id` beside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prism.dispatch.dispatcher import Call
from prism.errors import InvalidArguments
from prism.kit.ids import GOVERNANCE_ID_LENGTH
from prism.registry.mega_tools import LEGACY_BINDINGS

GOVERNANCE_KEYS = ("mission_id", "oversight_request_id")
ENVELOPE_KEYS = frozenset({"operation", "app", "entity", "arguments", *GOVERNANCE_KEYS})
MISSION_HEADER = "x-prism-mission"
OVERSIGHT_HEADER = "x-prism-oversight-request"


def call_from_envelope(tool_name: str, payload: Any, *, door: str) -> Call:
    if not isinstance(payload, dict):
        raise InvalidArguments("arguments: must be a JSON object", field="arguments")
    if len(payload) == 1 and isinstance(payload.get("kwargs"), dict):
        payload = payload["kwargs"]
    if tool_name in LEGACY_BINDINGS:
        # The governance fields travel beside the flat parameters (MCP has no per-call headers): an approved
        # oversight request or a mission must reach these tools too.
        governance = {name: payload[name] for name in GOVERNANCE_KEYS if name in payload}
        flat = {key: value for key, value in payload.items() if key not in governance}
        arguments = flat["arguments"] if set(flat) == {"arguments"} else flat
        return Call(tool_name=tool_name, door=door, arguments=arguments,
                    mission_id=_id_field(governance, "mission_id"),
                    oversight_request_id=_id_field(governance, "oversight_request_id"))
    if not ENVELOPE_KEYS.issuperset(payload):
        unknown = sorted(set(payload) - ENVELOPE_KEYS)
        raise InvalidArguments(f"{unknown[0]}: not an envelope field; send handler parameters inside "
                               "`arguments`", field=unknown[0])
    get = payload.get
    return Call(tool_name=tool_name, door=door, arguments=get("arguments", {}), operation=get("operation"),
                app=get("app"), entity=get("entity"), mission_id=_id_field(payload, "mission_id"),
                oversight_request_id=_id_field(payload, "oversight_request_id"))


# A longer value is no mission's or oversight request's id, and PostgreSQL would refuse to store it where an
# escalated call keeps the mission it named.
ID_LENGTH = GOVERNANCE_ID_LENGTH


def _id_field(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= ID_LENGTH:
        raise InvalidArguments(f"{name}: must be an id (a non-empty string of at most {ID_LENGTH} characters)",
                               field=name)
    return value


def with_governance_headers(call: Call, headers: Mapping[str, str]) -> Call:
    """Take the mission and the oversight request from the headers too; they must agree with the envelope."""
    for header, name in ((MISSION_HEADER, "mission_id"), (OVERSIGHT_HEADER, "oversight_request_id")):
        value = headers.get(header)
        if value is None:
            continue
        value = _id_field({name: value.strip()}, name)
        current = getattr(call, name)
        if current is not None and current != value:
            raise InvalidArguments(f"{name}: the {header} header and the envelope name different ids",
                                   field=name)
        setattr(call, name, value)
    return call
