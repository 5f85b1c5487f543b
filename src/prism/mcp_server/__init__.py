"""The MCP door: /api/mcp/sse (streamable HTTP 2025-03-26 and legacy HTTP+SSE 2024-11-05)."""
