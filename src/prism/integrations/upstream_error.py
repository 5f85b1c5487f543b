"""The error an upstream becomes: it answered with an error, could not be reached, or took too long (imported
OpenAPI services and upstream MCP servers alike)."""

from __future__ import annotations

from prism.errors import PrismError


class UpstreamError(PrismError):
    """The upstream answered with an error, could not be reached, or took too long."""
