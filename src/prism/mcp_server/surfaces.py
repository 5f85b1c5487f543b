"""The split tool surface: each `prism_<mega_tool>` door cut by what its operations do.

A mega-tool's annotations must hold for every operation behind it, so `prism_entity_crud` (lists, creates and
deletes) can only say "may destroy": a client that confirms destructive tools would confirm every list. On the
split surface each door becomes up to three tools, each listing only its own operations:

    prism_<mega_tool>_read          readOnlyHint, idempotentHint       (read-scope handlers)
    prism_<mega_tool>_write         neither read-only nor destructive  (creates, updates, actions)
    prism_<mega_tool>_destructive   destructiveHint                    (handlers declared destructive)

A call goes to the same dispatcher under the mega-tool's own name (the audit ledger records `prism_<mega_tool>`);
an operation called through the wrong variant is refused (`wrong_tool_variant`, by the dispatcher: after the
permission check, audited like any refusal) before it runs, so a client that runs `_read` tools without asking
never runs a write.
"""

from __future__ import annotations

from typing import Any

from prism.mcp_server.outputs import output_schema
from prism.registry.catalog import envelope_schema
from prism.registry.mega_tools import MEGA_TOOLS, tool_name
from prism.registry.model import Handler, OperationKind

Kind = OperationKind
SURFACES = ("mega", "split")
KINDS: tuple[Kind, ...] = ("read", "write", "destructive")
_ANNOTATIONS: dict[Kind, dict[str, bool]] = {
    "read": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
    "write": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False},
    "destructive": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                    "openWorldHint": False},
}
_WORDING = {"read": "Read-only", "write": "Changes data, never destructively", "destructive": "Destructive"}
_VARIANTS = {f"{tool_name(m)}_{kind}": (m, kind) for m in MEGA_TOOLS for kind in KINDS}


def kind_of(handler: Handler) -> Kind:
    return handler.kind


def variant(name: str) -> tuple[str, Kind] | None:
    """(mega_tool, kind) of a split-surface tool name; None for any other name."""
    return _VARIANTS.get(name)


def split_tools(mega_tool: str, handlers: list[Handler], title: str) -> list[dict[str, Any]]:
    """The split-surface descriptors of one mega-tool, for the handlers this caller may call through it."""
    tools = []
    for kind in KINDS:
        mine = [h for h in handlers if kind_of(h) == kind]
        if not mine:
            continue
        apps = sorted({h.coordinate.app for h in mine})
        label = f"{title} ({kind})"
        tools.append({
            "name": f"{tool_name(mega_tool)}_{kind}",
            "title": label,
            "description": (f"{MEGA_TOOLS[mega_tool]} {_WORDING[kind]}: {len(mine)} operations across apps: "
                            f"{', '.join(apps)}."),
            "inputSchema": envelope_schema(mega_tool, mine),
            "outputSchema": output_schema(mine),
            "annotations": {"title": label, **_ANNOTATIONS[kind]},
        })
    return tools
