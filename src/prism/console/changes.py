"""What an escalated update would change: for a pending request on an `update` operation whose entity has a
`read` operation taking the same `id` (every entity_crud entity has both), the record as it is now, read
through the dispatcher as the person looking, beside the values the call asks for, field by field.

The read is a call like any other (door `console`, one ledger entry per request shown, the person's RBAC
applies: without the read permission no comparison is shown). At most `LIMIT` requests are compared per page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from prism.console.caller import ConsoleCaller
from prism.errors import PrismError

LIMIT = 20


@dataclass(frozen=True, slots=True)
class FieldChange:
    field: str
    current: Any
    requested: Any

    @property
    def changed(self) -> bool:
        return bool(self.current != self.requested)


@dataclass(frozen=True, slots=True)
class Comparison:
    changes: list[FieldChange]
    missing: str | None = None  # why the current record could not be read (it may have been deleted)


def _read_coordinate(coordinate: str) -> str | None:
    parts = coordinate.split("/")
    if len(parts) != 4 or parts[3] != "update":
        return None
    return "/".join((*parts[:3], "read"))


async def compare(request: Request, caller: ConsoleCaller, pending: list[dict[str, Any]]) -> dict[str, Comparison]:
    """Comparisons by request id, for the pending update requests this person may read the record of."""
    found: dict[str, Comparison] = {}
    for record in pending:
        if len(found) >= LIMIT:
            break
        arguments, read = record.get("arguments"), _read_coordinate(record["coordinate"])
        if read is None or not isinstance(arguments, dict) or not isinstance(arguments.get("id"), str):
            continue
        if not caller.may(read, request):
            continue
        try:
            current = await caller.call(request, read, {"id": arguments["id"]})
        except PrismError as exc:
            found[record["id"]] = Comparison([], missing=f"{exc.message} ({exc.code})")
            continue
        found[record["id"]] = Comparison([FieldChange(name, current.get(name), value)
                                          for name, value in arguments.items() if name != "id"])
    return found
