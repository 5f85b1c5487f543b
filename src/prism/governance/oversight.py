"""Human oversight: a call a persona escalates waits for a person to approve it, then runs exactly once.

A request is bound to the credential that asked, the coordinate and the SHA-256 digest of the exact
arguments. It can be decided until its SLA deadline; an approval can be used for as long again after the
decision. Using it is one conditional UPDATE (`status = 'approved'` → `consumed`) in the call's own
savepoint: two concurrent uses cannot both win, and a call that fails after consuming it gives it back.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext
from prism.errors import Conflict, NotFound, PermissionDenied, PrismError
from prism.events.outbox import emit, timestamp
from prism.governance.models import OversightRequest
from prism.kit.secret import MASK, QUERY_WITH_SECRETS_KEY, URL_WITH_SECRETS_KEY
from prism.kit.timeutil import utcnow
from prism.kit.urls import without_secrets
from prism.tenancy.repository import OrgRepository, to_record
from prism.tenancy.scope import acting_for

if TYPE_CHECKING:
    from prism.registry.model import Handler

PRIORITIES = ("low", "normal", "high", "critical")


def new_request_id() -> str:
    return "ovr_" + uuid.uuid4().hex


def repository(session: AsyncSession, organization_id: str) -> OrgRepository[OversightRequest]:
    return OrgRepository(session, OversightRequest, organization_id, label="oversight request")


def use_by(request: OversightRequest) -> datetime:
    """An approval stays usable for as long after the decision as the approver had to decide."""
    decided = request.decided_at or request.created_at
    return decided + (request.sla_deadline - request.created_at)


def oversight_record(request: OversightRequest, now: datetime | None = None) -> dict[str, Any]:
    record = to_record(request)
    now = now or utcnow()
    record["expired"] = (request.status == "pending" and now > request.sla_deadline) or (
        request.status == "approved" and now > use_by(request))
    return record


def as_reviewers_see(handler: Handler | None, arguments: Any) -> dict[str, Any] | None:
    """The arguments a request keeps for its reviewers, each secret masked: a field the handler's schema marks
    `writeOnly` (a connection's credential, a webhook's signing secret and custom headers) whole, a URL it marks
    `x-prism-url-secrets` (an integration's, endpoint's or webhook's URL, whose query may carry a key) with its
    query values and userinfo withheld, and an object of query parameters it marks `x-prism-query-secrets` (an
    endpoint call's `query`) with each parameter's value withheld, as a URL's query values are. The request is
    read by other people and stored in plain JSON. Its digest, over the arguments as sent, still binds the approval
    to them: the approved call is sent again with the real values."""
    if not isinstance(arguments, dict):
        return None
    properties = handler.schema.get("properties", {}) if handler is not None else {}
    shown = dict(arguments)
    for name, value in arguments.items():
        schema = properties.get(name)
        if value is None or not isinstance(schema, dict):
            continue
        if schema.get("writeOnly"):
            shown[name] = MASK
        elif schema.get(URL_WITH_SECRETS_KEY) and isinstance(value, str):
            shown[name] = without_secrets(value)
        elif schema.get(QUERY_WITH_SECRETS_KEY) and isinstance(value, dict):
            shown[name] = dict.fromkeys(value, MASK)
    return shown


async def open_request(session: AsyncSession, auth: AuthContext, *, request_id: str, persona_id: str,
                       coordinate: str, arguments: dict[str, Any] | None, arguments_digest: str, priority: str,
                       reason: str, sla_seconds: int, mission_id: str | None) -> None:
    """Record a pending request and emit `governance.oversight.requested` (the event id is the request id)."""
    now = utcnow()
    deadline = now + timedelta(seconds=sla_seconds)
    session.add(OversightRequest(
        id=request_id, organization_id=auth.organization_id, tenant_id=auth.tenant_id, persona_id=persona_id,
        credential_id=auth.credential_id, requested_by=auth.user_id, coordinate=coordinate,
        arguments=arguments, arguments_digest=arguments_digest, status="pending", priority=priority, reason=reason,
        sla_deadline=deadline, decision_note="", created_at=now, mission_id=mission_id))
    await session.flush()
    await emit(session, organization_id=auth.organization_id, tenant_id=auth.tenant_id,
               event_type="governance.oversight.requested", event_id=request_id,
               data={"request_id": request_id, "status": "pending", "priority": priority,
                     "oversight_reason": reason, "sla_deadline": timestamp(deadline), "coordinate": coordinate})


async def consume(session: AsyncSession, auth: AuthContext, *, request_id: str, coordinate: str,
                  arguments_digest: str, mission_id: str | None) -> None:
    """Use an approved request for this exact call, or refuse with the reason it cannot be used: each is a policy
    refusal, since without a usable approval the persona's oversight rule holds the call."""
    try:
        request = await repository(session, auth.organization_id).get(request_id)
    except NotFound:
        raise NotFound(f"oversight request {request_id!r} not found",
                       code="oversight_request_not_found", policy_refusal=True) from None
    if request.credential_id != auth.credential_id:
        raise PermissionDenied("this oversight request was opened by another credential; only the call that "
                               "asked for approval may use it", code="oversight_request_not_yours")
    if request.coordinate != coordinate or request.arguments_digest != arguments_digest:
        raise Conflict(f"oversight request {request_id} approves another call ({request.coordinate} with other "
                       "arguments); repeat the exact call that was escalated",
                       code="oversight_arguments_mismatch", policy_refusal=True)
    if request.mission_id != mission_id:  # the approval is for the call paid by that mission (or by none)
        raise Conflict(f"oversight request {request_id} approves the call under "
                       + (f"mission {request.mission_id}" if request.mission_id else "no mission")
                       + "; repeat it under the same mission", code="oversight_arguments_mismatch",
                       policy_refusal=True)
    now = utcnow()
    if request.status == "pending":
        if now > request.sla_deadline:
            raise Conflict(f"oversight request {request_id} expired undecided", code="oversight_request_expired",
                           policy_refusal=True)
        raise PrismError(f"oversight request {request_id} is still pending approval", code="oversight_pending",
                         status=409, policy_refusal=True, details={"oversight_request_id": request_id})
    if request.status == "rejected":
        raise PermissionDenied(f"oversight request {request_id} was rejected", code="oversight_rejected")
    if request.status == "consumed":
        raise Conflict(f"oversight request {request_id} has already been used; an approval runs one call",
                       code="oversight_request_used", policy_refusal=True)
    if now > use_by(request):
        raise Conflict(f"the approval of oversight request {request_id} has expired",
                       code="oversight_request_expired", policy_refusal=True)
    with acting_for(session, auth.organization_id):
        result = await session.execute(
            update(OversightRequest)
            .where(OversightRequest.id == request_id, OversightRequest.status == "approved")
            .values(status="consumed", consumed_at=now).execution_options(synchronize_session=False))
    if result.rowcount != 1:  # type: ignore[attr-defined]  # a concurrent call used it first
        raise Conflict(f"oversight request {request_id} has already been used; an approval runs one call",
                       code="oversight_request_used", policy_refusal=True)


async def decide(session: AsyncSession, auth: AuthContext, *, request_id: str, approve: bool,
                 note: str) -> dict[str, Any]:
    # Locked and read afresh: the session may hold this request as an earlier call of its ledger batch read it,
    # and another process may have decided or used it since; approving that stale copy would run its call twice.
    request = await repository(session, auth.organization_id).get(request_id, for_update=True)
    # Who may decide comes before the request's state: a caller that may decide nothing (its own request, or an
    # agent's credential) is refused as such whatever the request's state, and its refusal is a BLOCK decision.
    if request.requested_by == auth.user_id:
        raise PermissionDenied("the user whose call was escalated cannot decide its oversight request",
                               code="self_approval_forbidden")
    if auth.governed:
        # Human oversight is a person's decision: a governed credential is an agent's, and two agents acting for
        # two people could otherwise approve each other's held calls.
        raise PermissionDenied("this credential is governed by a persona or an AI system, so it cannot decide "
                               "oversight requests; a person does (the console, or a key without either)",
                               code="governed_credential")
    if request.status != "pending":
        raise Conflict(f"oversight request {request_id} is {request.status}; only pending requests are decided",
                       code="invalid_transition")
    now = utcnow()
    if now > request.sla_deadline:
        # The SLA is the oversight policy's own deadline: past it, nobody may decide (a refusal of the caller).
        raise Conflict(f"oversight request {request_id} expired at its SLA deadline", code="oversight_request_expired",
                       policy_refusal=True)
    request.status = "approved" if approve else "rejected"
    request.decided_by = auth.user_id
    request.decided_at = now
    request.decision_note = note
    await session.flush()
    return oversight_record(request, now)
