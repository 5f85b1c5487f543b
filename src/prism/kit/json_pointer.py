"""A JSON Pointer written as a URI fragment (`#/components/schemas/Item`, RFC 6901 section 6), followed in a
document."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from prism.kit.numbers import whole_number


def fragment_target(document: Any, fragment: str) -> Any:
    """What `fragment` (`#`, or `#/` and the pointer) names in `document`; LookupError when it names nothing."""
    if fragment == "#":
        return document
    if not fragment.startswith("#/"):
        raise LookupError(fragment)
    node = document
    for token in fragment[2:].split("/"):
        key = unquote(token).replace("~1", "/").replace("~0", "~")  # percent-decoded first, then the escapes
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and (index := whole_number(key)) is not None and index < len(node):
            node = node[index]
        else:
            raise LookupError(fragment)
    return node
