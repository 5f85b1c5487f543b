"""Post-hoc audit: re-check recent ledger entries against the personas as they are NOW.

A persona tightened after the fact (a new deny, a new oversight pattern) turns calls it used to allow
into violations. Each allowed entry made by an API key that has a persona today, or by an OAuth token
whose client the organization ties to a persona today, is evaluated again:

- the persona denies the coordinate now (or its cost is over the cap) → violation, severity `high`;
- the persona requires oversight now, and the call ran without an approved request → severity `medium`.

Each violation is stored once per (entry, persona version) — running the audit again reports nothing
new — and emits `governance.violation.detected` (the event id is the violation id).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.events.outbox import emit, timestamp
from prism.governance.models import AiSystem, ClientGovernance, GovernanceViolation, Persona
from prism.governance.policy import compiled
from prism.kit.timeutil import utcnow
from prism.models import ApiKey, AuditEntry
from prism.oauth.models import OAuthGrant, OAuthGrantOrganization
from prism.tenancy.scope import across_organizations, acting_for

MAX_ENTRIES = 10_000
# How far back a re-check reaches at most: 90 days.
MAX_HOURS = 24 * 90


# Whose persona applies to an entry: the key's own (a key's credential_id is its id), or the one its
# organization ties the OAuth client to (a token's credential_id is its grant's id). The session acting for the
# organization limits every table here (prism.tenancy.scope), but one: a grant's row belongs to its default
# organization, and a grant consented for several acts in each of them (docs/oauth.md), so its calls here are
# found through the consent rows, which are this organization's.
_KEY_HOLDER = (
    select(ApiKey.persona_id, ApiKey.ai_system_id, ApiKey.id.label("credential_id")).subquery("holder"))


def _client_holder(organization_id: str) -> Any:
    consented_here = select(OAuthGrantOrganization.grant_id).where(
        OAuthGrantOrganization.organization_id == organization_id)
    return (select(ClientGovernance.persona_id, ClientGovernance.ai_system_id, OAuthGrant.id.label("credential_id"))
            .join(OAuthGrant, OAuthGrant.client_id == ClientGovernance.client_id)
            .where(ClientGovernance.organization_id == organization_id,
                   or_(OAuthGrant.organization_id == organization_id, OAuthGrant.id.in_(consented_here)))
            .subquery("holder"))


def _entries_by(holder: Any, since: datetime, limit: int) -> Any:
    """Recent allowed entries whose credential now carries a persona; sealed ones only (a violation names its
    entry's position; an entry waiting to be sealed, for milliseconds, is seen by the next run)."""
    return (select(AuditEntry.id, AuditEntry.seq, AuditEntry.coordinate, AuditEntry.detail, AuditEntry.created_at,
                   holder.c.persona_id, holder.c.ai_system_id)
            .join(holder, holder.c.credential_id == AuditEntry.credential_id)
            .where(AuditEntry.outcome == "allowed", AuditEntry.created_at >= since, AuditEntry.seq.is_not(None),
                   holder.c.persona_id.is_not(None))
            .order_by(AuditEntry.id.desc()).limit(limit))


async def run_audit(session: AsyncSession, *, organization_id: str, tenant_id: str, since: datetime | None = None,
                    hours: float = 24, limit: int = MAX_ENTRIES) -> dict[str, Any]:
    # The CLI runs the audit too, in a session of its own: it acts for the organization here.
    with acting_for(session, organization_id):
        return await _run_audit(session, organization_id=organization_id, tenant_id=tenant_id,
                                since=since or utcnow() - timedelta(hours=hours), limit=limit)


async def _run_audit(session: AsyncSession, *, organization_id: str, tenant_id: str, since: datetime,
                     limit: int) -> dict[str, Any]:
    by_tokens = _entries_by(_client_holder(organization_id), since, limit).where(
        AuditEntry.organization_id == organization_id)
    entries = [*(await session.execute(_entries_by(_KEY_HOLDER, since, limit))).all(),
               # Across organizations for the grants only: every other table is limited to this one above.
               *(await session.execute(across_organizations(by_tokens))).all()]
    # Newest first, in the order written: an entry not sealed yet has no position (docs/audit.md).
    entries = sorted(entries, key=lambda e: e.id, reverse=True)[:limit]
    personas = {p.id: p for p in (await session.execute(select(Persona))).scalars()}
    systems = {s.id: s for s in (await session.execute(select(AiSystem))).scalars()}
    known = {(v.audit_entry_id, v.persona_id, v.persona_version) for v in (await session.execute(
        select(GovernanceViolation.audit_entry_id, GovernanceViolation.persona_id,
               GovernanceViolation.persona_version)
        .where(GovernanceViolation.audit_entry_id.in_([e.id for e in entries])))).all()} if entries else set()
    found: list[dict[str, Any]] = []
    for entry in entries:
        persona = personas.get(entry.persona_id)
        if persona is None:
            continue
        policy = compiled(persona)
        detail = entry.detail or {}
        verdict = policy.evaluate(entry.coordinate, int(detail.get("cost", 0)))
        if verdict.effect == "allow" or (verdict.effect == "oversight" and detail.get("oversight_request_id")):
            continue
        if (entry.id, persona.id, persona.version) in known:
            continue
        severity = "high" if verdict.effect == "deny" else "medium"
        reason = (verdict.reason if verdict.effect == "deny"
                  else f"{verdict.reason}, but the call ran without an approved oversight request")
        found.append(await _report(session, organization_id=organization_id, tenant_id=tenant_id, entry=entry,
                                   persona=persona, severity=severity, reason=reason,
                                   system=systems.get(entry.ai_system_id) if entry.ai_system_id else None))
    return {"checked": len(entries), "since": timestamp(since), "violations": found}


async def _report(session: AsyncSession, *, organization_id: str, tenant_id: str, entry: Any, persona: Persona,
                  severity: str, reason: str, system: AiSystem | None) -> dict[str, Any]:
    violation = GovernanceViolation(
        id="vio_" + uuid.uuid4().hex, organization_id=organization_id, tenant_id=tenant_id,
        audit_entry_id=entry.id, audit_seq=entry.seq, persona_id=persona.id, persona_version=persona.version,
        policy_name=persona.name, severity=severity, ai_system_id=system.id if system else None,
        coordinate=entry.coordinate, reason=reason, detected_at=utcnow())
    session.add(violation)
    await session.flush()
    data = {"violation_id": violation.id, "policy_name": persona.name, "severity": severity,
            "ai_system": {"id": system.id, "name": system.name} if system else None,
            "detected_at": timestamp(violation.detected_at),
            # Beyond SPEC.md: which ledger entry broke the policy, and why.
            "audit_seq": entry.seq, "coordinate": entry.coordinate, "reason": reason}
    await emit(session, organization_id=organization_id, tenant_id=tenant_id,
               event_type="governance.violation.detected", data=data, event_id=violation.id)
    return data
