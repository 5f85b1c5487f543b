"""The one pipeline every door goes through.

    resolve coordinate → scope + RBAC → validate arguments → run the handler in the caller's
    organization → append to the audit ledger (same transaction as the handler's writes)

Allowed and refused calls are both written to the ledger before the door answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext
from prism.config import Settings
from prism.errors import InvalidArguments, MissingScope, PermissionDenied, PrismError, ToolNotFound
from prism.governance.gate import Gate
from prism.idempotency import IdempotencyKeyExpired, IdempotencyKeys, ReplayedRefusal, Ticket
from prism.kit.canonical import stable_digest
from prism.kit.validation import validated
from prism.ledger.entries import EntryDraft
from prism.ledger.writer import LedgerWriter
from prism.observability.dispatch import ObservedDispatch
from prism.observability.tracing import stage
from prism.ratelimit.headers import over_limit
from prism.ratelimit.limiter import RateLimiter
from prism.ratelimit.unavailable import LimiterUnavailable
from prism.ratelimit.verdict import Locked
from prism.registry import AfterCommit, Handler, HandlerCall, Registry
from prism.registry.mega_tools import LEGACY_BINDINGS, SCOPE_OF_CLASS, mega_tool_of, scopes_allow, tool_name
from prism.registry.model import OperationKind
from prism.registry.visibility import enabled_integrations
from prism.storage import Database
from prism.tenancy.scope import acting_for


@dataclass(slots=True)
class Call:
    """A request to run one handler, as a door understood it."""

    tool_name: str
    door: str
    arguments: Any
    operation: Any = None
    app: Any = None
    entity: Any = None
    # Governance inputs a door passes through (header or envelope field); see docs/governance.md.
    mission_id: str | None = None
    oversight_request_id: str | None = None
    # The client's Idempotency-Key (docs/idempotency.md): the call runs once per credential and key.
    idempotency_key: str | None = None
    # The id of the HTTP request that made the call (X-Request-ID), kept in its ledger entry's detail.
    request_id: str | None = None
    # Set by the sandbox's me/ and introspect/ endpoints: a key may always learn who it is and what it may call,
    # so the platform scope is not asked for (only on the handlers in SELF_DESCRIPTIONS). Role, personas and
    # the audit ledger still apply, and introspection shows only what the credential may call.
    self_description: bool = False
    # The one kind of operation the door's tool admits (the MCP split surface's `prism_<mega_tool>_read` ...);
    # another kind is refused `wrong_tool_variant` once the caller is known to be allowed the operation.
    kind: OperationKind | None = None

    def coordinate_label(self) -> str:
        mega_tool = mega_tool_of(self.tool_name)
        parts = (self.app, self.entity, self.operation)
        if mega_tool and all(isinstance(p, str) for p in parts):
            return "/".join((mega_tool, *parts))
        return self.tool_name


# The handlers a `self_description` call may run without the scope: whoami and introspection, nothing else.
SELF_DESCRIPTIONS = frozenset({LEGACY_BINDINGS["prism_whoami"], LEGACY_BINDINGS["prism_introspect"]})


def _scope_needed(call: Call, handler: Handler) -> bool:
    return not (call.self_description and handler.path in SELF_DESCRIPTIONS)


def _where_to_look(door: str) -> str:
    """Where a caller finds what exists, in the terms of the door it came through: an MCP client's model can call
    a tool, not a URL."""
    if door == "mcp":
        return ("call the prism_introspect tool (dimension=operations with app and entity, or "
                "dimension=capability_search with a query) for what exists")
    return "see /api/v1/dev/introspect/ for what exists"


class Dispatcher:
    def __init__(self, db: Database, registry: Registry, settings: Settings,
                 limiter: RateLimiter | None = None) -> None:
        self.db = db
        self.registry = registry
        self.settings = settings
        # Counts the handlers' own limits (`Handler.limit`); None (the CLI, an operator's own call) counts nothing.
        self.limiter = limiter
        self.ledger = LedgerWriter(db, settings)
        self.idempotency = IdempotencyKeys(db, settings)

    def start(self) -> None:
        """Start sealing at once: logs an upgrade or a stopped process left waiting are sealed before any call."""
        self.ledger.sealer.start()

    async def close(self) -> None:
        await self.ledger.close()

    def resolve(self, call: Call) -> Handler:
        # Legacy tools take flat parameters; a coordinate (the /prism/... path) never names one.
        bound = LEGACY_BINDINGS.get(call.tool_name) if call.operation is None else None
        if bound is not None:
            handler = self.registry.get_path(bound)
        else:
            mega_tool = mega_tool_of(call.tool_name)
            if mega_tool is None:
                raise ToolNotFound(f"unknown tool {call.tool_name!r}")
            app, entity, operation = call.app, call.entity, call.operation
            if not (isinstance(operation, str) and operation and isinstance(app, str) and app
                    and isinstance(entity, str) and entity):
                for name in ("operation", "app", "entity"):
                    value = getattr(call, name)
                    if not isinstance(value, str) or not value:
                        raise InvalidArguments(f"{name}: required, a string naming the {name}",
                                               field=name)
            # The path of Coordinate(mega_tool, app, entity, operation), without building one per call.
            handler = self.registry.get_path(f"{mega_tool}/{app}/{entity}/{operation}")
        if handler is None:
            raise ToolNotFound(f"no handler {call.coordinate_label()}; {_where_to_look(call.door)}",
                               code="operation_not_found")
        return handler

    @staticmethod
    def validate(handler: Handler, arguments: Any) -> BaseModel:
        params = validated(handler.params, arguments)
        if handler.check_arguments is not None:  # an imported operation: its service's own schema too
            problems = handler.check_arguments(arguments)
            if problems:
                raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                                       details={"errors": problems})
        return params

    def resolve_for(self, auth: AuthContext, call: Call) -> Handler:
        """`resolve`, where an imported integration the caller's organization has not enabled does not exist."""
        handler = self.resolve(call)
        if handler.integration is not None and handler.integration not in enabled_integrations(self.registry, auth):
            raise ToolNotFound(f"no handler {call.coordinate_label()}; {_where_to_look(call.door)}",
                               code="operation_not_found")
        return handler

    @staticmethod
    def authorize(auth: AuthContext, handler: Handler, *, scope_needed: bool = True) -> None:
        """Scope and role, checked before the arguments are: a caller that may not call a handler learns nothing
        about its parameters (a 400 would name them). `scope_needed=False` (a self-description, see
        `Call.self_description`) leaves the role's checks."""
        needed = SCOPE_OF_CLASS[handler.scope]
        if scope_needed and not scopes_allow(auth.scopes, handler.scope, handler.permission):
            message = f"this credential lacks the {needed} scope needed by {handler.path}"
            if auth.permissions.allows(handler.permission):  # the scope alone stands in the way
                raise MissingScope(message, scope=needed)
            raise PermissionDenied(message)
        if not auth.permissions.allows(handler.permission):
            raise PermissionDenied(f"role {auth.role!r} lacks permission {handler.permission}")
        if handler.people_only and not auth.is_person:
            raise PermissionDenied(f"{handler.path} is for a person (signed in to the console or /keys/, with "
                                   "email and password on key registration, or the operator's command line), never "
                                   "an API key or token",
                                   code="person_required")

    def _checked(self, auth: AuthContext, call: Call) -> _Checks:
        """Resolve, authorize (before validation), the door's kind, validate: the first refusal is kept, not
        raised, with how far the call got (a persona's refusal outranks one that comes after authorization)."""
        checks = _Checks()
        try:
            with stage("prism.checks"):
                checks.handler = handler = self.resolve_for(auth, call)
                self.authorize(auth, handler, scope_needed=_scope_needed(call, handler))
                checks.authorized = True
                _admitted(call, handler)
                checks.params = self.validate(handler, call.arguments)
        except PrismError as exc:
            checks.refusal = exc
        return checks

    async def dispatch(self, auth: AuthContext, call: Call) -> tuple[Handler | None, Any]:
        """The handler and its data; a call with an idempotency key that repeats an earlier one gets the earlier
        outcome instead: its data as a `Replay`, or its refusal raised again (`ReplayedRefusal`)."""
        with ObservedDispatch(call, governed=_governed(auth, call)), stage("prism.dispatch"):
            return await self._dispatch(auth, call)

    async def _dispatch(self, auth: AuthContext, call: Call) -> tuple[Handler | None, Any]:
        if call.idempotency_key is not None:
            return await self._dispatch_once(auth, call, call.idempotency_key)
        gate = _gate_for(auth, call)
        checks = self._checked(auth, call)
        handler, params, refusal = checks.handler, checks.params, checks.refusal
        if refusal is None and handler is not None and handler.limit is not None:  # no coroutine for the others
            refusal = await self._over_limit(auth, handler)
        if refusal is not None:
            if checks.authorized and gate is not None:  # the persona speaks before the arguments do (Gate.refuse)
                gate.handler = handler
                with stage("prism.ledger"):
                    await self.ledger.run(auth.organization_id, partial(gate.refuse, refusal),
                                          partial(_governed_draft, gate), writes=False, finish=gate.finish)
                raise AssertionError("Gate.refuse always raises") from refusal
            finish = None
            if gate is not None and auth.ai_system_id is not None:
                gate.handler, finish = handler, gate.finish
            with stage("prism.ledger"):
                await self.ledger.record(auth.organization_id, partial(_draft, auth, call, handler), refusal=refusal,
                                         finish=finish)
            raise refusal
        assert handler is not None and params is not None
        prepared = await _prepared(handler, params, self.settings)
        with stage("prism.ledger"):  # governance, the handler and the audit entry, in the batch's transaction
            if gate is not None:
                gate.handler = handler
                result = await self.ledger.run(
                    auth.organization_id, partial(self._governed_work, gate, params, prepared),
                    partial(_governed_draft, gate), writes=True, finish=gate.finish)
            else:
                work = partial(self._work, auth, handler, params, prepared)
                draft_for = partial(_draft, auth, call, handler)
                result = await self.ledger.run(auth.organization_id, work, draft_for, writes=not handler.read_only)
        if type(result) is AfterCommit:
            result = await self._after_commit(auth, handler, result)
        return handler, result

    async def _dispatch_once(self, auth: AuthContext, call: Call, key: str) -> tuple[Handler | None, Any]:
        """`dispatch` for a call with an idempotency key: one ledger unit claims the key (prism.idempotency.ticket),
        then refuses, runs or replays; it always writes (after the audit head is locked), as the key's row does."""
        await self.idempotency.purge_now_and_then()
        # Two requests are the same when door, organization acted in, coordinate as sent, governance inputs and
        # arguments (canonical JSON) are.
        ticket = self.idempotency.ticket(auth, key, stable_digest([
            call.door, auth.organization_id, call.tool_name, call.app, call.entity, call.operation,
            call.mission_id, call.oversight_request_id, call.arguments, *_kind_named(call)]))
        gate = _gate_for(auth, call)
        checks = self._checked(auth, call)
        handler, params, refusal = checks.handler, checks.params, checks.refusal
        prepared = None
        if handler is not None and params is not None:  # checked: its database-free work comes before the unit
            if (handler.prepare is not None or handler.limit is not None) and await ticket.held():
                prepared = _Unprepared(IdempotencyKeyExpired(
                    "this Idempotency-Key's earlier call expired while this request waited; send it again"))
            else:
                refusal = await self._over_limit(auth, handler)
                if refusal is None:
                    prepared = await _prepared(handler, params, self.settings)
        if gate is not None:
            gate.handler = handler

        async def work(session: AsyncSession) -> Any:
            replay = await ticket.claim(session)
            if replay is not None:
                return replay
            if refusal is not None:
                ticket.refused_by_the_checks()  # not the key's answer: nothing ran (docs/idempotency.md)
                if checks.authorized and gate is not None:
                    await gate.refuse(refusal, session)  # the persona speaks before the arguments do
                raise refusal
            assert handler is not None and params is not None
            result = await (self._governed_work(gate, params, prepared, session) if gate is not None
                            else self._work(auth, handler, params, prepared, session))
            if type(result) is not AfterCommit:
                ticket.ran(result)
            return result

        async def finish(session: AsyncSession, error: BaseException | None) -> None:
            if gate is not None and ticket.replay is None:  # a replay decides nothing and spends nothing
                await gate.finish(session, error)
            await ticket.finish(session, error)

        def draft_for(appended_at: datetime, outcome: str, error_code: str | None, status: int) -> EntryDraft:
            draft = (_governed_draft(gate, appended_at, outcome, error_code, status) if gate is not None
                     else _draft(auth, call, handler, appended_at, outcome, error_code, status))
            return ticket.mark(draft)

        with stage("prism.ledger"):
            result = await self.ledger.run(auth.organization_id, work, draft_for, writes=True, finish=finish)
        if type(result) is AfterCommit:
            assert handler is not None
            result = await self._complete_after_commit(auth, handler, result, ticket)
        elif isinstance(result, ReplayedRefusal):
            raise result  # the first call's refusal, again
        return handler, result

    async def _over_limit(self, auth: AuthContext, handler: Handler) -> PrismError | None:
        """The refusal of a call over its handler's own limit (`Handler.limit`), counted once the call passed its
        checks and before its database-free work: refused as the checks refuse (audited, its persona asked first;
        never an idempotency key's answer, so a retry after Retry-After runs). A keyed call whose key's earlier
        call will answer it (`Ticket.held`) is not counted: `_dispatch_once` asks that first."""
        limiter = self.limiter
        if handler.limit is None or limiter is None:
            return None
        try:
            verdict = await limiter.hit(handler.limit, auth.organization_id)
        except LimiterUnavailable as exc:  # as the edge: refused when failing closed, else let through uncounted
            return exc if limiter.fails_closed else None
        if isinstance(verdict, Locked) or verdict.allowed:  # Locked: only a hit naming an address gets it
            return None
        return over_limit(verdict, f"this organization made {verdict.limit} changes of this kind in the last "
                                   f"minute, its limit ({handler.limit}); retry in {verdict.retry_after} s")

    async def _complete_after_commit(self, auth: AuthContext, handler: Handler, deferred: AfterCommit[Any],
                                     ticket: Ticket) -> Any:
        try:
            data = await self._after_commit(auth, handler, deferred, ticket)
        except Exception as exc:
            await ticket.complete(error=exc)  # nothing more when the record's transaction stored the answer
            raise
        await ticket.complete(data)
        return data

    async def _after_commit(self, auth: AuthContext, handler: Handler, deferred: AfterCommit[Any],
                            ticket: Ticket | None = None) -> Any:
        """The slow part of a call whose audit entry is committed: outside any transaction, then recorded (with
        its idempotency key's final answer, when it has a key)."""
        outcome = await deferred.send()
        async with self.ledger.db.write() as session:
            with acting_for(session, auth.organization_id):
                data = await deferred.record(HandlerCall(auth, session, self.registry, handler, self.settings,
                                                         limiter=self.limiter), outcome)
            if ticket is not None:
                await ticket.answer_with_record(session, data)
        if isinstance(data, PrismError):  # a refusal `record` wrote down: committed with its record, then raised
            raise data
        return data

    async def _governed_work(self, gate: Gate, params: BaseModel, prepared: Any, session: AsyncSession) -> Any:
        assert gate.handler is not None
        await gate.check(session)
        return await self._work(gate.auth, gate.handler, params, prepared, session)

    async def _work(self, auth: AuthContext, handler: Handler, params: BaseModel, prepared: Any,
                    session: AsyncSession) -> Any:
        if type(prepared) is _Unprepared:  # refused where the handler would have run: audited as its refusal
            raise prepared.error
        # The handler's session acts for the caller's organization: every statement it runs is limited to it.
        with acting_for(session, auth.organization_id):
            result = await handler.func(HandlerCall(auth, session, self.registry, handler, self.settings,
                                                    prepared, self.limiter, self.ledger.db), params)
            if not handler.read_only:  # surface constraint violations inside the handler's savepoint
                await session.flush()
        return result


@dataclass(slots=True)
class _Checks:
    """What `Dispatcher._checked` found: the handler and its parameters, or the refusal."""

    handler: Handler | None = None
    authorized: bool = False
    params: BaseModel | None = None
    refusal: PrismError | None = None


@dataclass(frozen=True, slots=True)
class _Unprepared:
    """What a handler's `prepare` raised."""

    error: Exception


async def _prepared(handler: Handler, params: BaseModel, settings: Settings) -> Any:
    """The handler's database-free work (`Handler.prepare`), before its ledger unit is queued: the ledger's batch
    serialises every call of the process (`prepare` sends its CPU-bound part to a worker thread: the event loop
    serves every call)."""
    if handler.prepare is None:
        return None
    with stage("prism.prepare"):
        try:
            return await handler.prepare(params, settings)
        except Exception as exc:
            return _Unprepared(exc)


def _admitted(call: Call, handler: Handler) -> None:
    """Refuse an operation of another kind than the door's tool admits (`Call.kind`). Checked after `authorize`: a
    caller that may not call the operation learns nothing of what it does; audited like every refusal, and for a
    governed call, after its persona, as the arguments are (`Gate.refuse`)."""
    if call.kind is None or handler.kind == call.kind:
        return
    coordinate = handler.coordinate
    right = f"{tool_name(coordinate.mega_tool)}_{handler.kind}"
    raise InvalidArguments(f"operation {coordinate.operation!r} of {coordinate.app}/{coordinate.entity} is a "
                           f"{handler.kind} operation, not a {call.kind} one: call {right}",
                           code="wrong_tool_variant", details={"tool": right})


def _kind_named(call: Call) -> list[str]:
    """The admitted kind, in an idempotency key's request digest: the same arguments through `_read` and `_write`
    are two requests. Absent when no kind is named, so the digest of every other call stays what it was."""
    return [] if call.kind is None else [call.kind]


def _gate_for(auth: AuthContext, call: Call) -> Gate | None:
    """Personas, missions and AI systems cost only the calls that have them: a Gate checks the policy and budget
    in the ledger transaction and records decisions."""
    return Gate(auth, call) if _governed(auth, call) else None


def _governed(auth: AuthContext, call: Call) -> bool:
    return auth.governed or call.mission_id is not None


def _draft(auth: AuthContext, call: Call, handler: Handler | None, appended_at: datetime, outcome: str,
           error_code: str | None, status: int) -> EntryDraft:
    if handler is not None:  # the tool and coordinate were found in the registry: its names, as they are
        tool_name, coordinate, cost = call.tool_name, handler.path, handler.cost
    else:  # client-chosen names land in text columns, which cannot hold NUL on PostgreSQL
        tool_name = call.tool_name.replace("\x00", "\ufffd")[:64]
        coordinate, cost = call.coordinate_label().replace("\x00", "\ufffd")[:255], 0
    return EntryDraft(
        organization_id=auth.organization_id, tenant_id=auth.tenant_id, created_at=appended_at,
        actor_user_id=auth.user_id, credential_id=auth.credential_id, door=call.door, tool_name=tool_name,
        coordinate=coordinate, arguments_digest=stable_digest(call.arguments), outcome=outcome,
        error_code=error_code, detail=_detail(auth, call, status, cost),
    )


def _detail(auth: AuthContext, call: Call, status: int, cost: int) -> dict[str, Any]:
    """An entry's detail. The AI system and persona of the credential and the mission the call named are known
    before any check: every entry names them, whatever its outcome, so the ledger's `ai_system_id` and `persona_id`
    filters find the calls refused before governance was consulted too. The Gate adds what it evaluated (the
    persona's version and rule, an oversight request used)."""
    detail: dict[str, Any] = {"status": status, "cost": cost}
    if call.request_id is not None:
        detail["request_id"] = call.request_id
    if auth.ai_system_id is not None:
        detail["ai_system_id"] = auth.ai_system_id
    if auth.persona_id is not None:
        detail["persona"] = {"id": auth.persona_id}
    if call.mission_id is not None:  # client-chosen: JSON on PostgreSQL cannot hold NUL
        detail["mission_id"] = call.mission_id.replace("\x00", "\ufffd")
    return detail


def _governed_draft(gate: Gate, appended_at: datetime, outcome: str, error_code: str | None,
                    status: int) -> EntryDraft:
    draft = _draft(gate.auth, gate.call, gate.handler, appended_at, outcome, error_code, status)
    draft.detail.update(gate.detail)
    return draft
