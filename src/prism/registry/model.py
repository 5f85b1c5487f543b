from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from prism.auth.context import AuthContext
    from prism.config import Settings
    from prism.ratelimit.limiter import RateLimiter
    from prism.registry.registry import Registry
    from prism.storage import Database

ScopeClass = Literal["read", "write", "execute"]


@dataclass(frozen=True, slots=True)
class Coordinate:
    mega_tool: str
    app: str
    entity: str
    operation: str
    # `mega_tool/app/entity/operation`, built once: every dispatch reads it (audit entry, refusals).
    path: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", f"{self.mega_tool}/{self.app}/{self.entity}/{self.operation}")


@dataclass(slots=True)
class HandlerCall:
    """What a handler receives besides its parameters: the caller, its transaction, and the settings of the
    app serving it (never the process environment's: an app may be built with settings of its own)."""

    auth: AuthContext
    session: AsyncSession
    registry: Registry
    handler: Handler
    settings: Settings
    # What the handler's `prepare` made of its parameters (see `Handler.prepare`); None when it has none.
    prepared: Any = None
    # The app's rate limiter, for what a handler counts beyond its own `Handler.limit` (a change an upstream
    # announced during the call: prism.integrations.mcp_upstream); None where nothing is counted (the CLI).
    limiter: RateLimiter | None = None
    # The database, for the slow read of an `AfterCommit` answer, which runs in a read transaction of its own
    # once the call's batch committed (prism.apps.ledger's verification); None where there is none (the CLI).
    database: Database | None = None

    @property
    def organization_id(self) -> str:
        return self.auth.organization_id


OperationKind = Literal["read", "write", "destructive"]
HandlerFunc = Callable[[HandlerCall, Any], Awaitable[Any]]


@dataclass(slots=True)
class Handler:
    coordinate: Coordinate
    params: type[BaseModel]
    func: HandlerFunc
    description: str
    category: str | None
    scope: ScopeClass
    permission: str | None
    cost: int
    read_only: bool
    destructive: bool
    keywords: tuple[str, ...] = ()
    # Requests people make of it, in their own words ("book in the 50 zip ties from PO 7781"): capability search
    # reads them besides the description (registry/search.py), so a request need not use the catalog's words.
    examples: tuple[str, ...] = ()
    # What the handler answers, when it declares it (MCP publishes it as the tool's output schema).
    result: type[BaseModel] | None = None
    # Filled once by Registry.freeze(): the JSON Schema of `params` (unless given: an imported operation's), and
    # of `result`, when declared.
    schema: dict[str, Any] = field(default_factory=dict)
    result_schema: dict[str, Any] | None = None
    # An imported integration's name (prism.integrations): only organizations that enabled it see and call it.
    integration: str | None = None
    # Checks arguments against `schema` after `params` accepted them: the problems found, each with its field.
    # Imported operations use it: their schema is the service's own, and declaring a Pydantic class for each of
    # thousands of operations would cost start-up seconds (docs/integrations.md).
    check_arguments: Callable[[dict[str, Any]], list[dict[str, str]]] | None = None
    # Database-free work on the validated parameters (fetching a document, parsing, compiling it) that would
    # otherwise run inside the ledger transaction, which every call of the process waits on: the dispatcher
    # awaits `prepare(params, settings)` before queueing the call's unit (CPU-bound work goes to a worker thread
    # there) and hands its result to the handler as `HandlerCall.prepared`. What it raises is raised where the
    # handler would have run, so the call is refused and audited as if the handler had raised it
    # (docs/extending.md).
    prepare: Callable[[Any, Settings], Awaitable[Any]] | None = None
    # Only a person may call it (`AuthContext.is_person`): credentials an agent holds neither see it in any list
    # nor call it (managing one's own credentials: a leaked key must not mint another, or revoke its owner's).
    people_only: bool = False
    # A rate-limit tier (prism.ratelimit.limiter.HANDLER_TIERS) each call of this handler counts in, per organization,
    # besides the door's: for work every organization shares, such as the registry rebuild an import makes. The
    # dispatcher counts it before `prepare`; a call over the ceiling is refused 429 and audited.
    limit: str | None = None

    @property
    def path(self) -> str:
        return self.coordinate.path

    @property
    def kind(self) -> OperationKind:
        """What the operation does, as the MCP split surface groups operations (mcp_server/surfaces.py)."""
        if self.read_only:
            return "read"
        return "destructive" if self.destructive else "write"
