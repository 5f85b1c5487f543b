"""How much of an upstream MCP server's tool list Prism reads and keeps, bounded as an OpenAPI import is
(prism.integrations.openapi): whatever its size in bytes or its nesting, a list cannot cost Prism more than
these limits in memory, storage, argument checks, descriptors or search.

As for an import, a list past a limit is refused whole, naming the tool and the limit (`502 upstream_error`
when it is added or refreshed; when it was announced during a call, the stored list keeps serving and the
integration says why, status `stale`), and a description longer than an imported operation's is cut to the
same length. Each answer the list comes in is bounded before it is read (prism.kit.outbound_httpx and the MCP
client's limit per event); these bound what the answers add up to, and what one tool may hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from prism.integrations.openapi import DESCRIPTION_CHARS, MAX_SCHEMA_DEPTH
from prism.integrations.upstream_error import UpstreamError

# Far above real servers' lists (tens to a few hundred tools, a few KB each: GitHub's MCP server lists about 100
# tools in about 100 KB).
MAX_TOOLS = 1_000
MAX_TOOL_PAGES = 100
MAX_TOOL_LIST_BYTES = 10_000_000  # the whole list as JSON, every page together
# Each part of a tool that is JSON (its inputSchema, outputSchema, annotations, _meta…): as large as a schema of
# a large OpenAPI operation, and at most MAX_SCHEMA_DEPTH levels deep, as an imported schema.
MAX_TOOL_PART_BYTES = 200_000
# MCP's own rule for tool names (1 to 128 characters); the name is what a call sends back, so it is never cut.
MAX_TOOL_NAME_CHARS = 128
# A description (or a title standing for one) is kept as long as an imported operation's, cut beyond.
TOOL_DESCRIPTION_CHARS = DESCRIPTION_CHARS


class PastLimits(UpstreamError):
    """A tool list past what Prism reads. Its message is Prism's own, naming the tool and the limit: it is shown as
    it is wherever the list's failure is (prism.integrations.failures)."""


def past_limits(what: str) -> PastLimits:
    return PastLimits(f"the MCP server's tool list is past what Prism reads: {what}", code="upstream_error",
                      status=502, details={"upstream_status": None})


@dataclass(slots=True)
class ToolListBudget:
    """What the pages read so far add up to; `take` refuses the page that goes past a limit."""

    tools: int = 0
    size: int = 0

    def take(self, page: list[dict[str, Any]]) -> None:
        for tool in page:
            problem = tool_problem(tool)
            if problem:
                raise past_limits(f"the tool {_label(tool.get('name'))}: {problem}")
            self.size += len(orjson.dumps(tool))
        self.tools += len(page)
        if self.tools > MAX_TOOLS:
            raise past_limits(f"more than {MAX_TOOLS:,} tools")
        if self.size > MAX_TOOL_LIST_BYTES:
            raise past_limits(f"larger than {MAX_TOOL_LIST_BYTES:,} bytes")


def tool_problem(tool: dict[str, Any]) -> str:
    """Why one tool (as the MCP client read it) is past the limits; empty when it is not."""
    name = tool.get("name")
    if isinstance(name, str) and len(name) > MAX_TOOL_NAME_CHARS:
        return f"its name is longer than {MAX_TOOL_NAME_CHARS} characters"
    for part, value in tool.items():
        if not isinstance(value, (dict, list)):
            continue  # text and numbers: the name is checked above, descriptions are cut when stored
        if _deeper_than(value, MAX_SCHEMA_DEPTH):
            return f"its {part} nests deeper than {MAX_SCHEMA_DEPTH} levels"
        try:
            size = len(orjson.dumps(value))
        except orjson.JSONEncodeError:  # an integer beyond 64 bits: no stored operation can hold it
            return f"its {part} holds an integer beyond 64 bits"
        if size > MAX_TOOL_PART_BYTES:
            return f"its {part} is larger than {MAX_TOOL_PART_BYTES:,} bytes"
    return ""


def _deeper_than(value: Any, levels: int) -> bool:
    """Whether `value` nests objects and lists more than `levels` deep below itself, counted as an imported
    schema's depth is. A loop, not recursion: it may nest as deep as the MCP client's parser allowed."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if depth > levels:
            return True
        children = node.values() if isinstance(node, dict) else node
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _label(name: Any) -> str:
    text = repr(name) if isinstance(name, str) else "(no name)"
    return text if len(text) <= 60 else text[:57] + "…'"
