"""The MCP protocol revisions Prism speaks, and what each one allows on the wire.

Two eras share the door:

- handshake revisions (2024-11-05 … 2025-11-25): `initialize` picks the revision, `Mcp-Session-Id` carries it;
- the per-request revision 2026-07-28: no handshake and no session; every request names its revision in
  `params._meta` and in the `MCP-Protocol-Version` header, and `server/discover` advertises what we speak.
"""

from __future__ import annotations

# Oldest to newest: the order every "at least" question is answered by (revisions are a set, not dates).
KNOWN = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
HANDSHAKE = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
MODERN = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE[0]
LEGACY_SSE = "2024-11-05"  # the revision of the HTTP+SSE transport (replaced by streamable HTTP in 2025-03-26)
# What server/discover and a -32022 refusal advertise, newest first.
SUPPORTED = (*MODERN, *HANDSHAKE)

# The per-request envelope of 2026-07-28 (params._meta keys).
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


def at_least(version: str, minimum: str) -> bool:
    return version in KNOWN and KNOWN.index(version) >= KNOWN.index(minimum)


def is_modern(version: str) -> bool:
    return version in MODERN


def allows_batches(version: str) -> bool:
    """JSON-RPC batches: in 2024-11-05 and 2025-03-26; removed from 2025-06-18 on."""
    return not at_least(version, "2025-06-18")


def has_structured_output(version: str) -> bool:
    """Tool `title`, `outputSchema`, `_meta`, `structuredContent` and `resource_link` content: 2025-06-18 on."""
    return at_least(version, "2025-06-18")
