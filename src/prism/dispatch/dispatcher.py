"""The one pipeline every door goes through.

    resolve coordinate → validate arguments → scope + RBAC → run the handler in the caller's
    organization → append to the audit ledger (same transaction as the handler's writes)

Allowed and refused calls are both written to the ledger before the door answers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import IntegrityError

from prism.auth.context import AuthContext
from prism.db import Database
from prism.errors import Conflict, InvalidArguments, PermissionDenied, PrismError, ToolNotFound
from prism.governance import ledger
from prism.kit.canonical import digest
from prism.kit.timeutil import utcnow
from prism.registry import Coordinate, Handler, HandlerCall, Registry
from prism.registry.mega_tools import SCOPE_OF_CLASS, mega_tool_of

log = logging.getLogger("prism.dispatch")

# Legacy tools take flat parameters and are bound to one handler each.
LEGACY_BINDINGS = {
    "prism_whoami": Coordinate("report_query", "core", "caller", "whoami"),
    "prism_introspect": Coordinate("report_query", "core", "registry", "introspect"),
}


@dataclass(slots=True)
class Call:
    """A request to run one handler, as a door understood it."""

    tool_name: str
    door: str
    arguments: Any
    operation: Any = None
    app: Any = None
    entity: Any = None

    def coordinate_label(self) -> str:
        parts = (self.operation, self.app, self.entity)
        if mega_tool_of(self.tool_name) and all(isinstance(p, str) for p in parts):
            return f"{self.tool_name[6:]}/{self.app}/{self.entity}/{self.operation}"
        return self.tool_name


class Dispatcher:
    def __init__(self, db: Database, registry: Registry) -> None:
        self.db = db
        self.registry = registry

    def resolve(self, call: Call) -> Handler:
        bound = LEGACY_BINDINGS.get(call.tool_name)
        if bound is not None:
            handler = self.registry.get(bound)
        else:
            mega_tool = mega_tool_of(call.tool_name)
            if mega_tool is None:
                raise ToolNotFound(f"unknown tool {call.tool_name!r}")
            for field in ("operation", "app", "entity"):
                value = getattr(call, field)
                if not isinstance(value, str) or not value:
                    raise InvalidArguments(f"{field}: required, a string naming the {field}",
                                           details={"field": field})
            handler = self.registry.get(Coordinate(mega_tool, call.app, call.entity, call.operation))
        if handler is None:
            raise ToolNotFound(f"no handler {call.coordinate_label()}; "
                               "see /api/v1/dev/introspect/ for what exists", code="operation_not_found")
        return handler

    @staticmethod
    def validate(handler: Handler, arguments: Any) -> BaseModel:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidArguments("arguments: must be a JSON object", details={"field": "arguments"})
        try:
            return handler.params.model_validate(arguments)
        except ValidationError as exc:
            problems = [{"field": ".".join(str(p) for p in e["loc"]) or "arguments", "message": e["msg"]}
                        for e in exc.errors(include_url=False, include_input=False)]
            text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
            raise InvalidArguments(text, details={"errors": problems}) from None

    @staticmethod
    def authorize(auth: AuthContext, handler: Handler) -> None:
        needed = SCOPE_OF_CLASS[handler.scope]
        if needed not in auth.scopes:
            raise PermissionDenied(f"this credential lacks the {needed} scope needed by {handler.path}")
        if not auth.permissions.allows(handler.permission):
            raise PermissionDenied(f"role {auth.role!r} lacks permission {handler.permission}")

    async def dispatch(self, auth: AuthContext, call: Call) -> tuple[Handler, Any]:
        handler: Handler | None = None
        try:
            handler = self.resolve(call)
            params = self.validate(handler, call.arguments)
            self.authorize(auth, handler)
            return handler, await self._run(auth, call, handler, params)
        except PrismError as exc:
            await self._record_refusal(auth, call, handler, exc)
            raise
        except Exception:
            log.exception("handler failed", extra={"tool": call.tool_name})
            await self._record_refusal(auth, call, handler, PrismError("internal error"))
            raise

    async def _run(self, auth: AuthContext, call: Call, handler: Handler, params: BaseModel) -> Any:
        if handler.read_only:
            async with self.db.read() as session:
                data = await handler.func(HandlerCall(auth, session, self.registry, handler), params)
            async with self.db.write() as session:
                await ledger.append(session, self._draft(auth, call, handler, "allowed", None, 200))
            return data
        try:
            async with self.db.write() as session:
                data = await handler.func(HandlerCall(auth, session, self.registry, handler), params)
                await ledger.append(session, self._draft(auth, call, handler, "allowed", None, 200))
        except IntegrityError as exc:
            raise Conflict("the change conflicts with an existing record") from exc
        return data

    async def _record_refusal(self, auth: AuthContext, call: Call, handler: Handler | None,
                              exc: PrismError) -> None:
        async with self.db.write() as session:
            await ledger.append(session, self._draft(auth, call, handler, "refused", exc.code, exc.status))

    @staticmethod
    def _draft(auth: AuthContext, call: Call, handler: Handler | None, outcome: str,
               error_code: str | None, status: int) -> ledger.EntryDraft:
        try:
            arguments_digest = digest(call.arguments)
        except TypeError:
            arguments_digest = digest(repr(call.arguments))
        return ledger.EntryDraft(
            organization_id=auth.organization_id, tenant_id=auth.tenant_id, created_at=utcnow(),
            actor_user_id=auth.user_id, credential_id=auth.credential_id, door=call.door,
            tool_name=call.tool_name[:64],
            coordinate=(handler.path if handler else call.coordinate_label())[:255],
            arguments_digest=arguments_digest, outcome=outcome, error_code=error_code,
            detail={"status": status, "cost": handler.cost if handler else 0},
        )
