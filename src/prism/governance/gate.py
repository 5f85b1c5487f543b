"""The governance step of the dispatcher: persona policy, human oversight, mission budget, decisions.

Only calls that need it pay for it: a credential with no persona and no AI system, calling outside a
mission, never builds a Gate (the dispatcher checks three attributes and takes its usual path).

`check` runs inside the handler's SAVEPOINT, before the handler: whatever it changes (a mission's spend,
an oversight request used) is undone with the handler's own writes if the call is refused. `finish` runs
after it, outside the savepoint but in the same ledger transaction: what must persist even though the
call was refused (the oversight request, the budget-exceeded mark, the decision, their events) commits
with the call's audit entry.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext
from prism.errors import Blocked, BudgetExceeded, InvalidArguments, OversightRequired, PrismError
from prism.governance import missions, oversight
from prism.governance.decisions import Outcome, record_decision
from prism.governance.models import Persona
from prism.governance.policy import CompiledPolicy, Verdict, compiled
from prism.kit.canonical import canonical_json, stable_digest
from prism.observability.tracing import current_trace_id
from prism.registry.mega_tools import LEGACY_BINDINGS
from prism.tenancy.scope import acting_for

if TYPE_CHECKING:
    from prism.dispatch.dispatcher import Call
    from prism.registry import Handler

# whoami, introspection and capability search: they read the registry and the caller's own credential, nothing of
# the organization's and no upstream, so a credential refused for naming no mission can still learn who it is and
# what it may call.
SELF_DESCRIPTIONS = frozenset(LEGACY_BINDINGS.values())


class Gate:
    __slots__ = ("auth", "call", "detail", "handler", "opened_request", "policies_evaluated", "started",
                 "trace_id")

    def __init__(self, auth: AuthContext, call: Call) -> None:
        self.auth = auth
        self.call = call
        self.started = time.perf_counter()
        self.trace_id = current_trace_id() or uuid.uuid4().hex  # the request's trace, when traced
        self.handler: Handler | None = None
        self.opened_request: tuple[str, CompiledPolicy, str] | None = None  # (id, policy, reason)
        self.policies_evaluated = 1  # scope + RBAC, always
        # Added to the call's audit entry, beyond what every entry of the call names (dispatcher `_draft`).
        self.detail: dict[str, Any] = {}

    async def check(self, session: AsyncSession) -> None:
        handler, auth, call = self.handler, self.auth, self.call
        assert handler is not None
        # A batch the ledger replays runs this again on a fresh transaction: start from a clean slate.
        self.policies_evaluated, self.opened_request, self.detail = 1, None, {}
        if auth.persona_id is not None:
            policy, verdict = await self._persona_allows(session)
            if verdict.effect == "oversight":
                if call.oversight_request_id is None:
                    _readable_by_reviewers(call.arguments)
                    request_id = oversight.new_request_id()
                    self.opened_request = (request_id, policy, verdict.reason)
                    raise OversightRequired(
                        f"{verdict.reason}: oversight request {request_id} is pending; once approved, repeat "
                        "this exact call with header X-Prism-Oversight-Request (or envelope field "
                        "oversight_request_id) set to its id",
                        details={"oversight_request_id": request_id, "status": "pending"})
                await oversight.consume(session, auth, request_id=call.oversight_request_id,
                                        coordinate=handler.path, arguments_digest=self.arguments_digest(),
                                        mission_id=call.mission_id)
                self.detail["oversight_request_id"] = call.oversight_request_id
        if call.mission_id is not None:
            self.policies_evaluated += 1
            await missions.charge(session, auth.organization_id, call.mission_id, handler.cost)

    async def refuse(self, refusal: PrismError, session: AsyncSession) -> NoReturn:
        """Refuse a call whose arguments failed, once its persona has been asked: a coordinate the persona denies
        is `Blocked` whatever the arguments (the caller learns nothing of the parameters of a tool it may not
        use, and the decision says BLOCK); else the arguments' own refusal."""
        if self.auth.persona_id is not None:
            await self._persona_allows(session)
        raise refusal

    async def _persona_allows(self, session: AsyncSession) -> tuple[CompiledPolicy, Verdict]:
        """The persona's verdict on the handler, noted in the entry's detail; `Blocked` when it denies."""
        assert self.handler is not None
        self.policies_evaluated += 1
        policy = await _policy(session, self.auth)
        verdict = policy.evaluate(self.handler.path, self.handler.cost)
        self.detail["persona"] = {"id": policy.persona_id, "version": policy.version, "rule": verdict.rule}
        if verdict.effect == "deny":
            raise Blocked(verdict.reason, details={"persona_id": policy.persona_id, "rule": verdict.rule})
        # After the persona's own refusals (naming a mission would not lift them) and before oversight (no request
        # is opened for a call that would be refused anyway).
        if policy.require_mission and self.call.mission_id is None and needs_mission(self.handler):
            self.detail["persona"]["rule"] = "require_mission"
            raise Blocked(f"persona {policy.name!r} requires a mission for {self.handler.path}: send header "
                          "X-Prism-Mission (or envelope field mission_id) naming an active mission",
                          details={"persona_id": policy.persona_id, "rule": "require_mission"})
        return policy, verdict

    async def finish(self, session: AsyncSession, error: BaseException | None) -> None:
        auth = self.auth
        coordinate = self.handler.path if self.handler else self.call.coordinate_label()[:255]
        if isinstance(error, OversightRequired) and self.opened_request is not None:
            request_id, policy, reason = self.opened_request
            await oversight.open_request(
                session, auth, request_id=request_id, persona_id=policy.persona_id, coordinate=coordinate,
                arguments=oversight.as_reviewers_see(self.handler, self.call.arguments),
                arguments_digest=self.arguments_digest(), priority=policy.oversight_priority, reason=reason,
                sla_seconds=policy.oversight_sla_seconds, mission_id=self.call.mission_id)
        elif isinstance(error, BudgetExceeded) and self.call.mission_id is not None:
            await missions.note_exceeded(session, organization_id=auth.organization_id, tenant_id=auth.tenant_id,
                                         mission_id=self.call.mission_id, cost=self.handler.cost if self.handler
                                         else 0, coordinate=coordinate)
        if auth.ai_system_id is not None:
            code = None if error is None else getattr(error, "code", "internal_error")
            refusal = error if isinstance(error, PrismError) else None
            latency_ms = int((time.perf_counter() - self.started) * 1000)
            await record_decision(session, auth, Outcome(
                coordinate, code, refusal.message if refusal else None,
                blocked=refusal is not None and refusal.policy_refusal,
                policies_evaluated=self.policies_evaluated, latency_ms=latency_ms, trace_id=self.trace_id))

    def arguments_digest(self) -> str:
        return stable_digest(self.call.arguments if self.call.arguments is not None else {})


def needs_mission(handler: Handler) -> bool:
    """Whether a persona's `require_mission` applies to the handler: every handler but those that can neither
    change anything nor spend anything — read-only ones declaring cost 0 (a mission would charge them nothing),
    and the self-descriptions. A read with a cost (an imported integration's paid lookup, say) spends, and a write
    changes something whatever its cost, so both need a mission."""
    return not (handler.read_only and (handler.cost == 0 or handler.path in SELF_DESCRIPTIONS))


def _readable_by_reviewers(arguments: Any) -> None:
    """A request keeps the arguments for its reviewers, as JSON: arguments nested deeper than JSON is stored
    (254 levels; a body may nest 1,024) are refused, since nobody could read what they would approve."""
    try:
        canonical_json(arguments)
    except TypeError:
        raise InvalidArguments("arguments: nested too deeply for a reviewer to read (at most 254 levels)",
                               field="arguments") from None


async def _policy(session: AsyncSession, auth: AuthContext) -> CompiledPolicy:
    with acting_for(session, auth.organization_id):
        persona = (await session.execute(select(Persona).where(Persona.id == auth.persona_id))).scalar_one_or_none()
    if persona is None:  # fail closed: a key whose persona vanished may do nothing
        raise Blocked("this credential's persona no longer exists; nothing is allowed until a persona is attached",
                      details={"persona_id": auth.persona_id})
    return compiled(persona)
