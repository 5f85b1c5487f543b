"""Reading parameter schemas Prism did not write (an imported service's, an upstream MCP tool's).

Any sub-schema may be a boolean (valid JSON Schema: `true` admits anything, `false` nothing), and a schema that
is itself invalid (its operation's arguments are then checked for their shape only) may hold anything where a
keyword expects an object or a list. Readers take what is there and pass over the rest.
"""

from __future__ import annotations

from typing import Any


def keywords_of(schema: Any) -> dict[str, Any]:
    """A sub-schema's keywords: none for a boolean schema, or for anything else that is not an object."""
    return schema if isinstance(schema, dict) else {}


def mapping_of(schema: Any, keyword: str) -> dict[str, Any]:
    """A keyword that holds an object (`properties`, `$defs`); empty when it holds anything else."""
    value = keywords_of(schema).get(keyword)
    return value if isinstance(value, dict) else {}


def list_of(schema: Any, keyword: str) -> list[Any]:
    """A keyword that holds a list (`required`, `anyOf`, `enum`); empty when it holds anything else."""
    value = keywords_of(schema).get(keyword)
    return value if isinstance(value, list) else []
