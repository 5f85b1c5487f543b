"""governance: personas and AI systems (config_manage), human oversight and the post-hoc audit
(governance_review), decisions and violations (audit_query).

Managing personas and AI systems, deciding oversight requests and running the audit need dedicated
permissions (`governance.manage_*`, `governance.approve_oversight_request`, `governance.run_audit`) that
the seeded `member` and `viewer` roles do not hold: they are the security team's levers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from sqlalchemy import case

from prism.apps import shipped_examples
from prism.apps.params import ListParams, Params, ReadParams
from prism.errors import Conflict, PermissionDenied
from prism.governance import oversight, personas
from prism.governance.models import AiSystem, GovernanceDecision, GovernanceViolation, OversightRequest
from prism.governance.post_hoc_audit import MAX_HOURS, run_audit
from prism.ledger.keys import LedgerKeys
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import OrgRepository, sent_changes, text_search, to_record

app = HandlerApp("governance", description="Personas, AI systems, human oversight, decisions and violations.",
                 examples=shipped_examples())

MANAGE_PERSONA = "governance.manage_persona"
MANAGE_AI_SYSTEM = "governance.manage_ai_system"
APPROVE = "governance.approve_oversight_request"
RiskLevel = Literal["minimal", "limited", "high", "unacceptable"]


# --- personas --------------------------------------------------------------------------------------

class PersonaCreateParams(personas.PersonaCreate, Params):
    pass


class PersonaUpdateParams(personas.PersonaUpdate, Params):
    id: str = Field(..., min_length=1, max_length=64)


class _Holder(Params):
    """Who a persona or AI system is attached to: one key of the organization, or one OAuth client's tokens
    acting in the organization."""

    key: str | None = Field(None, min_length=1, max_length=64, description="Key id or displayed prefix.")
    client_id: str | None = Field(None, min_length=1, max_length=128,
                                  description="OAuth client id: applies to its tokens acting in this organization.")

    @model_validator(mode="after")
    def _one_holder(self) -> _Holder:
        if (self.key is None) == (self.client_id is None):
            raise ValueError("name exactly one of key and client_id")
        return self


def _ungoverned(call: HandlerCall) -> None:
    """Refuse a credential that is itself governed (a persona or an AI system applies to it): an agent's key acting
    for an owner could otherwise detach or loosen its own persona, or untie itself from its AI system, and go on
    ungoverned. A person (the console, the CLI) or an ungoverned key changes governance."""
    if call.auth.governed:
        raise PermissionDenied("this credential is governed by a persona or an AI system, so it cannot change "
                               "personas or AI systems; a person does (the console, the CLI, or a key without "
                               "either)", code="governed_credential")


async def _attach(call: HandlerCall, holder: _Holder, column: str, value: str | None) -> dict[str, Any]:
    _ungoverned(call)
    return await personas.attach(call.session, organization_id=call.organization_id, column=column, value=value,
                                 key_ref=holder.key, client_id=holder.client_id, tenant_id=call.auth.tenant_id)


class AttachParams(_Holder):
    persona_id: str | None = Field(None, max_length=64, description="Persona to attach; null detaches.")


@app.handler("config_manage", "persona", "list", params=ListParams, scope="read",
             description="List personas (policy objects attached to keys).",
             keywords=("policies", "agent roles", "policy", "rules", "permissions profile", "guardrails"))
async def list_personas(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    repo = personas.repository(call.session, call.organization_id)
    page = await repo.page(text_search(repo.base(), [repo.model.name], p.search), page=p.page,
                           page_size=p.page_size, ordering=p.ordering, orderable=("name", "created_at"),
                           default_ordering="name")
    for item in page["items"]:
        item["default"] = item.pop("default_effect")
    return page


@app.handler("config_manage", "persona", "read", params=ReadParams, scope="read", description="Read one persona.",
             keywords=("policy", "rules", "permissions profile", "guardrails"))
async def read_persona(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return personas.persona_record(await personas.repository(call.session, call.organization_id).get(p.id))


@app.handler("config_manage", "persona", "create", params=PersonaCreateParams, scope="write",
             permission=MANAGE_PERSONA,
             keywords=("policy", "allow", "deny", "oversight pattern", "rules", "permissions profile", "guardrails",
                       "define what a key may do"),
             description="Create a persona: allow/deny/oversight coordinate patterns, default, per-call cost cap.")
async def create_persona(call: HandlerCall, p: PersonaCreateParams) -> dict[str, Any]:
    _ungoverned(call)
    return await personas.create_persona(call.session, organization_id=call.organization_id,
                                         tenant_id=call.auth.tenant_id, fields=p)


@app.handler("config_manage", "persona", "update", params=PersonaUpdateParams, scope="write",
             permission=MANAGE_PERSONA, description="Change a persona; takes effect on the next call.",
             keywords=("policy", "rules", "permissions profile", "guardrails", "edit policy"))
async def update_persona(call: HandlerCall, p: PersonaUpdateParams) -> dict[str, Any]:
    _ungoverned(call)
    return await personas.update_persona(call.session, organization_id=call.organization_id, persona_id=p.id,
                                         changes=p)


@app.handler("config_manage", "persona", "delete", params=ReadParams, scope="write", permission=MANAGE_PERSONA,
             destructive=True, description="Delete a persona that no key uses.",
             keywords=("policy", "rules", "permissions profile", "guardrails", "remove policy"))
async def delete_persona(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    _ungoverned(call)
    return await personas.delete_persona(call.session, organization_id=call.organization_id, persona_id=p.id)


@app.handler("config_manage", "persona", "attach", params=AttachParams, scope="write", permission=MANAGE_PERSONA,
             description="Attach a persona to an API key of this organization, or to an OAuth client's tokens "
                         "acting in it (persona_id null detaches it).",
             keywords=("policy", "rules", "permissions profile", "guardrails", "apply policy to key", "detach",
                       "oauth app", "connected app"))
async def attach_persona(call: HandlerCall, p: AttachParams) -> dict[str, Any]:
    return await _attach(call, p, "persona_id", p.persona_id)


# --- AI systems ------------------------------------------------------------------------------------

class _AiSystemName(Params):
    @field_validator("name", mode="before", check_fields=False)
    @classmethod
    def _unpadded(cls, value: Any) -> Any:
        return personas.unpadded_name(value)  # as a persona's name


class AiSystemCreate(_AiSystemName):
    name: str = Field(..., min_length=1, max_length=100)
    description: str = Field("", max_length=2000)
    risk_level: RiskLevel = Field(..., description="EU AI Act tiers: minimal, limited, high, unacceptable.")


class AiSystemAttach(_Holder):
    ai_system_id: str | None = Field(None, max_length=64, description="AI system; null unties the key or client.")


def _systems(call: HandlerCall) -> OrgRepository[AiSystem]:
    return OrgRepository(call.session, AiSystem, call.organization_id, label="AI system")


@app.handler("config_manage", "ai_system", "list", params=ListParams, scope="read",
             description="List AI systems (governance records with a risk level).",
             keywords=("ai model", "ai application", "risk classification", "ai inventory"))
async def list_ai_systems(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    repo = _systems(call)
    return await repo.page(text_search(repo.base(), [AiSystem.name], p.search), page=p.page,
                           page_size=p.page_size, ordering=p.ordering, orderable=("name", "created_at"),
                           default_ordering="name")


@app.handler("config_manage", "ai_system", "create", params=AiSystemCreate, scope="write",
             permission=MANAGE_AI_SYSTEM, description="Register an AI system with its risk level.",
             keywords=("ai model", "ai application", "risk classification"))
async def create_ai_system(call: HandlerCall, p: AiSystemCreate) -> dict[str, Any]:
    _ungoverned(call)
    row = _systems(call).add(tenant_id=call.auth.tenant_id, **p.model_dump())
    await call.session.flush()
    return to_record(row)


class AiSystemUpdate(_AiSystemName):
    id: str = Field(..., min_length=1, max_length=64)
    name: str | None = Field(None, min_length=1, max_length=100)
    description: str | None = Field(None, max_length=2000)
    risk_level: RiskLevel | None = Field(None, description="EU AI Act tiers: minimal, limited, high, unacceptable.")


@app.handler("config_manage", "ai_system", "read", params=ReadParams, scope="read",
             description="Read one AI system, with the number of keys tied to it.",
             keywords=("ai model", "ai application", "risk classification"))
async def read_ai_system(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    record = await _systems(call).get_record(p.id)
    record["keys_tied"], record["clients_tied"] = await personas.holders(call.session, call.organization_id,
                                                                         "ai_system_id", p.id)
    return record


@app.handler("config_manage", "ai_system", "update", params=AiSystemUpdate, scope="write",
             permission=MANAGE_AI_SYSTEM,
             keywords=("risk level", "reclassify", "ai model", "ai application", "risk classification"),
             description="Change an AI system's name, description or risk level; decisions made from then on "
                         "carry the new risk level.")
async def update_ai_system(call: HandlerCall, p: AiSystemUpdate) -> dict[str, Any]:
    _ungoverned(call)
    row = await _systems(call).get(p.id)
    for name, value in sent_changes(p, AiSystem).items():  # null clears, absent keeps
        setattr(row, name, value)
    await call.session.flush()
    return to_record(row)


@app.handler("config_manage", "ai_system", "delete", params=ReadParams, scope="write", permission=MANAGE_AI_SYSTEM,
             destructive=True,
             description="Delete an AI system no key is tied to; its past decisions stay, with its id.",
             keywords=("ai model", "ai application", "risk classification"))
async def delete_ai_system(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    _ungoverned(call)
    row = await _systems(call).get(p.id)
    keys, clients = await personas.holders(call.session, call.organization_id, "ai_system_id", p.id)
    if keys or clients:
        raise Conflict(f"AI system {row.name!r} is tied to {keys} key(s) and {clients} OAuth client(s); untie "
                       "them first", code="ai_system_in_use")
    await call.session.delete(row)
    await call.session.flush()
    return {"id": p.id, "deleted": True}


@app.handler("config_manage", "ai_system", "attach", params=AiSystemAttach, scope="write",
             permission=MANAGE_AI_SYSTEM,
             description="Tie an API key, or an OAuth client's tokens acting in this organization, to an AI "
                         "system: their every call then records a governance decision.",
             keywords=("ai model", "ai application", "risk classification", "link key", "oauth app",
                       "connected app"))
async def attach_ai_system(call: HandlerCall, p: AiSystemAttach) -> dict[str, Any]:
    return await _attach(call, p, "ai_system_id", p.ai_system_id)


# --- human oversight -------------------------------------------------------------------------------

class OversightList(ListParams):
    status: Literal["pending", "approved", "rejected", "consumed"] | None = None
    decided: bool | None = Field(None, description="true: only requests decided (approved, rejected or consumed); "
                                                    "false: only those still pending.")


# `ordering: "urgency"`: the most urgent first, as a person works an inbox (priority, then the SLA deadline).
_URGENCY = (case({"critical": 0, "high": 1, "normal": 2, "low": 3}, value=OversightRequest.priority, else_=4),
            OversightRequest.sla_deadline, OversightRequest.id)


class Decide(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Oversight request id (ovr_...).")
    note: str = Field("", max_length=2000, description="Why; kept with the request.")


@app.handler("governance_review", "oversight_request", "list", params=OversightList, scope="read",
             description="List oversight requests (escalated calls waiting for, or given, a human decision).",
             keywords=("approvals", "pending review", "human in the loop", "approval request", "human review",
                       "escalated call"))
async def list_requests(call: HandlerCall, p: OversightList) -> dict[str, Any]:
    repo = OrgRepository(call.session, OversightRequest, call.organization_id, label="oversight request")
    stmt = text_search(repo.base(), [OversightRequest.coordinate, OversightRequest.reason], p.search)
    if p.status:
        stmt = stmt.where(OversightRequest.status == p.status)
    if p.decided is not None:
        stmt = stmt.where((OversightRequest.status != "pending") if p.decided else
                          (OversightRequest.status == "pending"))
    if p.ordering == "urgency":
        return await repo.page(stmt, page=p.page, page_size=p.page_size, order=_URGENCY)
    return await repo.page(stmt, page=p.page, page_size=p.page_size, ordering=p.ordering,
                           orderable=("created_at", "sla_deadline", "priority", "decided_at"),
                           default_ordering="-created_at", ranks={"priority": oversight.PRIORITIES})


@app.handler("governance_review", "oversight_request", "read", params=ReadParams, scope="read",
             description="Read one oversight request.", keywords=("approval request", "human review", "escalated call"))
async def read_request(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return oversight.oversight_record(await oversight.repository(call.session, call.organization_id).get(p.id))


@app.handler("governance_review", "oversight_request", "approve", params=Decide, scope="write", permission=APPROVE,
             description="Approve an escalated call: the same call, with this request id, may then run once.",
             keywords=("approval request", "human review", "escalated call", "human in the loop", "grant", "sign off"))
async def approve_request(call: HandlerCall, p: Decide) -> dict[str, Any]:
    return await oversight.decide(call.session, call.auth, request_id=p.id, approve=True, note=p.note)


@app.handler("governance_review", "oversight_request", "reject", params=Decide, scope="write", permission=APPROVE,
             description="Reject an escalated call: it can never run with this request.",
             keywords=("approval request", "human review", "escalated call", "human in the loop", "turn down"))
async def reject_request(call: HandlerCall, p: Decide) -> dict[str, Any]:
    return await oversight.decide(call.session, call.auth, request_id=p.id, approve=False, note=p.note)


class AuditParams(Params):
    hours: float = Field(24, gt=0, le=MAX_HOURS, description="How far back to re-check the ledger.")


@app.handler("governance_review", "audit", "run", params=AuditParams, scope="write",
             permission="governance.run_audit", keywords=("post-hoc audit", "compliance check", "drift"),
             description="Re-check recent ledger entries against the current personas; report new violations.")
async def run_post_hoc_audit(call: HandlerCall, p: AuditParams) -> dict[str, Any]:
    return await run_audit(call.session, organization_id=call.organization_id, tenant_id=call.auth.tenant_id,
                           hours=p.hours)


# --- decisions and violations ----------------------------------------------------------------------

class DecisionList(ListParams):
    decision: Literal["ALLOW", "BLOCK"] | None = None
    ai_system_id: str | None = Field(None, max_length=64)
    trace_id: str | None = Field(None, max_length=32)


@app.handler("audit_query", "decision", "list", params=DecisionList, scope="read",
             description="List governance decisions (ALLOW/BLOCK) recorded for AI systems' calls.",
             keywords=("audit trail", "allowed or blocked", "governance log"))
async def list_decisions(call: HandlerCall, p: DecisionList) -> dict[str, Any]:
    repo = OrgRepository(call.session, GovernanceDecision, call.organization_id, label="decision")
    stmt = text_search(repo.base(), [GovernanceDecision.coordinate, GovernanceDecision.primary_reason], p.search)
    for column, value in ((GovernanceDecision.decision, p.decision), (GovernanceDecision.ai_system_id,
                          p.ai_system_id), (GovernanceDecision.trace_id, p.trace_id)):
        if value:
            stmt = stmt.where(column == value)
    return await repo.page(stmt, page=p.page, page_size=p.page_size, ordering=p.ordering,
                           orderable=("created_at", "latency_ms"), default_ordering="-created_at")


@app.handler("audit_query", "decision", "read", params=ReadParams, scope="read",
             description="Read one governance decision.", keywords=("audit trail", "governance log"))
async def read_decision(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
    return await OrgRepository(call.session, GovernanceDecision, call.organization_id,
                               label="decision").get_record(p.id)


@app.handler("audit_query", "violation", "list", params=ListParams, scope="read",
             description="List policy violations found by the post-hoc audit.",
             keywords=("policy breach", "non-compliance", "audit findings"))
async def list_violations(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    repo = OrgRepository(call.session, GovernanceViolation, call.organization_id, label="violation")
    stmt = text_search(repo.base(), [GovernanceViolation.coordinate, GovernanceViolation.policy_name], p.search)
    result = await repo.page(stmt, page=p.page, page_size=p.page_size, ordering=p.ordering,
                             orderable=("detected_at", "severity"), default_ordering="-detected_at")
    keys = LedgerKeys(call.settings)
    for item in result["items"]:  # the ledger entry as the ledger's API names it (prism.ledger.keys)
        item["audit_entry_id"] = keys.entry_ref(call.organization_id, item["audit_entry_id"])
    return result


# config_manage/governance/webhook/...: the webhook management API's operations (registered on `app`).
from prism.apps.governance import webhooks  # noqa: E402, F401
