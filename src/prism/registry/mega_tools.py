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
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
OPERATION_PATTERN = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,63}$")

# A handler's scope class maps to the platform scope a credential must carry.
SCOPE_OF_CLASS = {"read": "mcp:read", "write": "mcp:write", "execute": "mcp:execute"}
PLATFORM_SCOPES = ("mcp:read", "mcp:write", "mcp:execute")


def tool_name(mega_tool: str) -> str:
    return f"{TOOL_PREFIX}{mega_tool}"


# Wire name -> mega-tool: every dispatch asks, and one dict lookup answers.
_MEGA_TOOL_OF_WIRE_NAME = {tool_name(m): m for m in MEGA_TOOLS}


def mega_tool_of(name: str) -> str | None:
    return _MEGA_TOOL_OF_WIRE_NAME.get(name)
