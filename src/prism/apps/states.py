"""State machines of the built-in apps: one table of allowed moves per entity, checked in one place."""

from __future__ import annotations

from typing import Any

from prism.errors import Conflict


def move(row: Any, target: str, transitions: dict[str, frozenset[str]], label: str) -> str:
    """Set `row.status` to `target` if the machine allows it; a refused move is 409 invalid_transition.
    Returns the previous status."""
    current: str = row.status
    if target not in transitions.get(current, frozenset()):
        allowed = sorted(transitions.get(current, frozenset())) or ["none"]
        raise Conflict(f"{label} status cannot go from {current} to {target} (allowed: {', '.join(allowed)})",
                       code="invalid_transition", details={"status": current, "requested": target})
    row.status = target
    return current
