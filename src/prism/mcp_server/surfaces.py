"""The split tool surface: each `prism_<mega_tool>` door cut by what its operations do.

A mega-tool's annotations must hold for every operation behind it, so `prism_entity_crud` (lists, creates and
deletes) can only say "may destroy": a client that confirms destructive tools would confirm every list. On the
split surface each door becomes up to three tools, each listing only its own operations:

    prism_<mega_tool>_read          readOnlyHint, idempotentHint       (read-scope handlers)
    prism_<mega_tool>_write         neither read-only nor destructive  (creates, updates, actions)
    prism_<mega_tool>_destructive   destructiveHint                    (handlers declared destructive)

A call goes to the same dispatcher under the mega-tool's own name (the audit ledger records `prism_<mega_tool>`);
an operation called through the wrong variant is refused before it runs, so a client that runs `_read` tools
without asking never runs a write.
"""

from __future__ import annotations

from typing import Any, Literal

from prism.auth.context import AuthContext
from prism.dispatch.dispatcher import Call
from prism.errors import InvalidArguments
from prism.mcp_server.outputs import output_schema
from prism.registry.catalog import envelope_schema
from prism.registry.mega_tools import MEGA_TOOLS, tool_name
from prism.registry.model import Handler
from prism.registry.registry import Registry
from prism.registry.visibility import enabled_integrations

Kind = Literal["read", "write", "destructive"]
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
    if handler.read_only:
        return "read"
    return "destructive" if handler.destructive else "write"


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


def check_variant(registry: Registry, auth: AuthContext, mega_tool: str, kind: Kind, call: Call) -> None:
    """Refuse an operation called through a variant that does not describe it. Operations unknown to the caller
    are left to the dispatcher, which refuses and audits them: those that do not exist, and an integration's
    that the caller's organization has not enabled (another organization's own import among them), which for it
    do not exist either. Checked on the call as the envelope was read (the `kwargs` wrapping unwrapped), which is
    the coordinate the dispatcher resolves."""
    parts = (call.app, call.entity, call.operation)
    if not all(isinstance(p, str) and p for p in parts):
        return
    handler = registry.get_path("/".join([mega_tool, *(str(p) for p in parts)]))
    if handler is None or kind_of(handler) == kind:
        return
    if handler.integration is not None and handler.integration not in enabled_integrations(registry, auth):
        return
    right = f"{tool_name(mega_tool)}_{kind_of(handler)}"
    raise InvalidArguments(f"operation {handler.coordinate.operation!r} of {parts[0]}/{parts[1]} is a "
                           f"{kind_of(handler)} operation, not a {kind} one: call {right}",
                           code="wrong_tool_variant", details={"tool": right})
