"""The 13 mega-tools: the doors on the wire are `prism_<mega_tool>`."""

from __future__ import annotations

import re

MEGA_TOOLS: dict[str, str] = {
    "entity_crud": "Create, read, update, delete, list and count business records.",
    "workflow_action": "Move records through their state machines (approve, submit, close, ...).",
    "report_query": "Computed reports and aggregates over business data.",
    "smart_action": "Multi-step operations that combine several records or systems.",
    "agent_command": "Start, steer and retire agent instances.",
    "integration_call": "Calls into connected external systems.",
    "document_op": "Upload, process, chunk and search documents.",
    "config_manage": "Tenant configuration: personas, roles, settings.",
    "notification_send": "Send notifications to people and channels.",
    "mission_control": "Plan, start and close missions with budgets.",
    "governance_review": "Human oversight: review, approve or reject escalated actions.",
    "audit_query": "Read and verify the hash-chained audit ledger.",
    "knowledge_query": "Search the knowledge base built from documents.",
}

LEGACY_TOOLS: dict[str, str] = {
    "prism_whoami": "Who is calling: the key, its user, organization, tenant and scopes.",
    "prism_introspect": "Explore the handler tree: mega-tools, apps, entities, operations, schemas, search.",
    "prism_search": "Which handler does this? Give a plain-language request; get the best handlers with their "
                    "confidence, argument schemas and ready calls, an ordered plan for several steps, and "
                    "no_match when nothing fits.",
}
# Legacy tools take flat parameters; each is bound to one handler (by path), which does the work.
LEGACY_BINDINGS: dict[str, str] = {
    "prism_whoami": "report_query/core/caller/whoami",
    "prism_introspect": "report_query/core/registry/introspect",
    "prism_search": "report_query/core/registry/search",
}

TOOL_PREFIX = "prism_"
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,40}\Z")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}\Z")
OPERATION_PATTERN = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,63}\Z")

# A handler's scope class maps to the platform scope a credential must carry.
SCOPE_OF_CLASS = {"read": "mcp:read", "write": "mcp:write", "execute": "mcp:execute"}
PLATFORM_SCOPES = ("mcp:read", "mcp:write", "mcp:execute")


def scopes_allow(scopes: frozenset[str], scope_class: str, permission: str | None) -> bool:
    """Whether a credential's scopes let it call a handler: the platform scope of the handler's class, or an OAuth
    per-app scope naming the handler's permission (`<app>.<verb>` names every `<app>.<verb>_<model>`,
    `<app>.<verb>_<model>` that one); a read handler that needs no permission (whoami, introspection) takes any
    per-app scope. The role's permissions are checked besides: a scope never widens them."""
    if SCOPE_OF_CLASS[scope_class] in scopes:
        return True
    if permission is None:
        return scope_class == "read" and any("." in s for s in scopes)  # per-app scopes have a dot, platform a colon
    if permission in scopes:
        return True
    app, _, rest = permission.partition(".")
    return f"{app}.{rest.split('_', 1)[0]}" in scopes


def tool_name(mega_tool: str) -> str:
    return f"{TOOL_PREFIX}{mega_tool}"


# Wire name -> mega-tool: every dispatch asks, and one dict lookup answers.
_MEGA_TOOL_OF_WIRE_NAME = {tool_name(m): m for m in MEGA_TOOLS}


def mega_tool_of(name: str) -> str | None:
    return _MEGA_TOOL_OF_WIRE_NAME.get(name)
