"""How an app declares its handlers, once each.

    app = HandlerApp("spare_parts", description="Spare-parts inventory")

    @app.handler("entity_crud", "spare_part", "read", params=ReadParams, scope="read")
    async def read_part(call: HandlerCall, params: ReadParams) -> dict: ...

A user's own package exposes a HandlerApp through the `prism.apps` entry-point group (or the
PRISM_APPS setting); see docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from prism.ratelimit.limiter import HANDLER_TIERS
from prism.registry.mega_tools import MEGA_TOOLS, NAME_PATTERN, OPERATION_PATTERN

if TYPE_CHECKING:
    from prism.config import Settings
from prism.registry.model import Coordinate, Handler, HandlerFunc, ScopeClass

_VIEW_OPERATIONS = {"list", "read", "search", "count", "get"}


def default_permission(app: str, entity: str, operation: str, scope: ScopeClass) -> str:
    """Django-style `<app>.<verb>_<model>` derived from what the operation does."""
    if scope == "read" or operation in _VIEW_OPERATIONS:
        verb = "view"
    elif operation == "create":
        verb = "add"
    elif operation == "delete":
        verb = "delete"
    else:
        verb = "change"
    return f"{app}.{verb}_{entity}"


@dataclass
class HandlerApp:
    name: str
    description: str = ""
    handlers: list[Handler] = field(default_factory=list)
    # Example requests per handler path (`<mega_tool>/<app>/<entity>/<operation>`): what people ask of each handler
    # in their own words, read by capability search. A path this app does not declare is left alone, so several
    # modules of one app can share one mapping.
    examples: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(f"app name {self.name!r} must match {NAME_PATTERN.pattern}")

    def handler(
        self,
        mega_tool: str,
        entity: str,
        operation: str,
        *,
        params: type[BaseModel],
        scope: ScopeClass,
        description: str,
        category: str | None = None,
        permission: str | None = "",
        cost: int = 1,
        destructive: bool = False,
        keywords: tuple[str, ...] = (),
        result: type[BaseModel] | None = None,
        prepare: Callable[[Any, Settings], Awaitable[Any]] | None = None,
        people_only: bool = False,
        limit: str | None = None,
    ) -> Callable[[HandlerFunc], HandlerFunc]:
        """Declare a handler. `permission=""` derives `<app>.<verb>_<entity>`; `None` means none needed.
        `result`, when given, is the model of what the handler answers (its data must validate against it).
        `prepare(params, settings)`, when given, does the handler's database-free work before its transaction
        (`Handler.prepare`). `limit` names a rate-limit tier each call counts in per organization
        (`Handler.limit`)."""
        if mega_tool not in MEGA_TOOLS:
            raise ValueError(f"unknown mega-tool {mega_tool!r}")
        if not NAME_PATTERN.match(entity) or not OPERATION_PATTERN.match(operation):
            raise ValueError(f"bad coordinate {entity}/{operation}")
        if cost < 0:
            raise ValueError("cost must be >= 0")
        if limit is not None and limit not in HANDLER_TIERS:
            raise ValueError(f"a handler's limit is one of {sorted(HANDLER_TIERS)}, not {limit!r}")

        def register(func: HandlerFunc) -> HandlerFunc:
            coordinate = Coordinate(mega_tool, self.name, entity, operation)
            self.handlers.append(Handler(
                coordinate=coordinate,
                params=params,
                func=func,
                description=description,
                category=category or self.name,
                scope=scope,
                permission=(default_permission(self.name, entity, operation, scope)
                            if permission == "" else permission),
                cost=cost,
                read_only=scope == "read",
                destructive=destructive,
                keywords=keywords,
                examples=tuple(self.examples.get(coordinate.path, ())),
                result=result,
                prepare=prepare,
                people_only=people_only,
                limit=limit,
            ))
            return func

        return register
