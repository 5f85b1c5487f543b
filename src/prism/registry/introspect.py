"""Introspection of the handler tree, limited to what the caller may call."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from prism.apps.params import Params
from prism.auth.context import AuthContext
from prism.errors import InvalidArguments
from prism.registry.registry import Registry

Dimension = Literal["mega_tools", "apps", "entities", "operations", "schema", "stats", "handlers",
                    "capability_search", "capability_path", "guide"]


class IntrospectParams(Params):
    dimension: Dimension = "mega_tools"
    mega_tool: str | None = Field(None, max_length=64)
    app: str | None = Field(None, max_length=64)
    entity: str | None = Field(None, max_length=64)
    operation: str | None = Field(None, max_length=64)
    query: str | None = Field(None, max_length=500)
    rerank: bool = False
    from_node: str | None = Field(None, max_length=255)
    to_node: str | None = Field(None, max_length=255)
    topic: str | None = Field(None, max_length=64)
    limit: int = Field(10, ge=1, le=100)


def introspect(registry: Registry, auth: AuthContext, params: IntrospectParams) -> dict[str, Any]:
    raise InvalidArguments(f"dimension {params.dimension} is not available yet")
