"""Governance decisions: one per dispatch by a credential tied to an AI system, stored with its event.

The decision row and its `governance.decision.allow|block` event share one id (`dec_…`) and are written
in the ledger transaction, next to the audit entry of the same call.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.auth.context import AuthContext
from prism.events.outbox import emit
from prism.governance.models import AiSystem, GovernanceDecision
from prism.kit.timeutil import utcnow
from prism.tenancy.scope import acting_for

DECISION_TYPE = "agent_action"


@dataclass(slots=True)
class Outcome:
    coordinate: str
    error_code: str | None
    message: str | None
    # The refusal was a policy saying no (`PrismError.policy_refusal`). Any other failure (unknown tool, bad
    # arguments, a handler's own error) leaves the decision ALLOW: governance let the action through, the action
    # itself failed.
    blocked: bool
    policies_evaluated: int
    latency_ms: int
    trace_id: str


async def record_decision(session: AsyncSession, auth: AuthContext, outcome: Outcome) -> dict[str, Any]:
    assert auth.ai_system_id is not None
    with acting_for(session, auth.organization_id):
        system = (await session.execute(select(AiSystem.name, AiSystem.risk_level).where(
            AiSystem.id == auth.ai_system_id))).first()
    blocked = outcome.blocked
    if blocked:
        reason = f"{outcome.error_code}: {outcome.message}"
    elif outcome.error_code is None:
        reason = "no policy violated"
    else:
        reason = f"no policy violated; the call failed: {outcome.error_code}"
    decision_id = "dec_" + uuid.uuid4().hex
    row = {
        "id": decision_id, "organization_id": auth.organization_id, "tenant_id": auth.tenant_id,
        "ai_system_id": auth.ai_system_id, "credential_id": auth.credential_id, "coordinate": outcome.coordinate,
        "decision": "BLOCK" if blocked else "ALLOW", "decision_type": DECISION_TYPE,
        "primary_reason": reason[:2000], "policies_evaluated": outcome.policies_evaluated,
        "policies_violated": 1 if blocked else 0, "latency_ms": outcome.latency_ms, "trace_id": outcome.trace_id,
        "created_at": utcnow(),
    }
    await session.execute(insert(GovernanceDecision).values(row))
    data = {
        "decision_id": decision_id, "decision": row["decision"], "decision_type": DECISION_TYPE,
        "primary_reason": row["primary_reason"],
        "ai_system": {"id": auth.ai_system_id, "name": system.name if system else None},
        "policies_evaluated": row["policies_evaluated"], "policies_violated": row["policies_violated"],
        "latency_ms": row["latency_ms"], "trace_id": outcome.trace_id,
        # Beyond SPEC.md: what was decided on, and the system's risk level (webhook risk_levels filter).
        "coordinate": outcome.coordinate, "risk_level": system.risk_level if system else None,
    }
    event_type = "governance.decision.block" if blocked else "governance.decision.allow"
    await emit(session, organization_id=auth.organization_id, tenant_id=auth.tenant_id, event_type=event_type,
               data=data, event_id=decision_id)
    return data
