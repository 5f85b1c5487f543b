"""claims: insurance payers, patients, claims and their lines; the claim lifecycle and payer reports.

Claim states: draft → submitted → adjudicated → paid, submitted → denied → appealed → adjudicated|denied,
draft → void. Lines change only while the claim is a draft; the billed amount is always their sum.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import case, func, select

from prism.apps import shipped_examples
from prism.apps.claims.models import Claim, ClaimLine, Patient, Payer
from prism.apps.claims.params import (
    ClaimAction,
    ClaimAdjudicate,
    ClaimAgingParams,
    ClaimAppeal,
    ClaimCopy,
    ClaimCreate,
    ClaimDeny,
    ClaimLineCreate,
    ClaimLineList,
    ClaimLineUpdate,
    ClaimList,
    ClaimPay,
    ClaimUpdate,
    PatientCreate,
    PatientList,
    PatientUpdate,
    PayerCreate,
    PayerList,
    PayerSummaryParams,
    PayerUpdate,
)
from prism.apps.crud import Entity, crud, dependants, repo
from prism.apps.finance.aging import BUCKETS, bucket_of, shown
from prism.apps.states import move
from prism.apps.sums import exact_sum, storable, sum_of, total
from prism.errors import Conflict
from prism.events.outbox import emit_for
from prism.kit.timeutil import iso, utcnow
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("claims", description="Insurance claims: payers, patients, claims, lines, adjudication.",
                 examples=shipped_examples())

CLAIM_TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"submitted", "void"}),
    "submitted": frozenset({"adjudicated", "denied"}),
    "appealed": frozenset({"adjudicated", "denied"}),
    "denied": frozenset({"appealed"}),
    "adjudicated": frozenset({"paid"}),
    "paid": frozenset(),
    "void": frozenset(),
}



async def _claim(call: HandlerCall, claim_id: str) -> Claim:
    claim: Claim = await repo(call, Claim, "claim").get(claim_id)
    return claim


def _draft_only(claim: Claim, what: str) -> None:
    if claim.status != "draft":
        raise Conflict(f"{what}: claim {claim.number} is {claim.status}; only draft claims change",
                       code="invalid_transition", details={"status": claim.status})


async def _recompute_billed(call: HandlerCall, claim: Claim) -> None:
    claim.billed_cents = storable(await sum_of(call.session, ClaimLine.amount_cents, ClaimLine.claim_id == claim.id),
                                  f"claim {claim.number}'s lines", "bill the rest on another claim")


async def _prepare_patient(call: HandlerCall, values: dict[str, Any], row: Any) -> dict[str, Any]:
    if values.get("payer_id") is not None:
        await repo(call, Payer, "payer").get(values["payer_id"])
    return values


async def _prepare_claim(call: HandlerCall, values: dict[str, Any], row: Claim | None) -> dict[str, Any]:
    if row is not None and set(values) - {"notes"}:
        _draft_only(row, "update")
    if values.get("payer_id") is not None:
        await repo(call, Payer, "payer").get(values["payer_id"])
    if values.get("patient_id") is not None:
        await repo(call, Patient, "patient").get(values["patient_id"])
    return values


async def _prepare_line(call: HandlerCall, values: dict[str, Any], row: ClaimLine | None) -> dict[str, Any]:
    claim = await _claim(call, row.claim_id if row is not None else values["claim_id"])
    _draft_only(claim, "claim lines")
    quantity = values.get("quantity", row.quantity if row is not None else 1)
    price = values.get("unit_price_cents", row.unit_price_cents if row is not None else 0)
    return {**values, "amount_cents": quantity * price}


async def _line_changed(call: HandlerCall, line: ClaimLine) -> None:
    await call.session.flush()
    await _recompute_billed(call, await _claim(call, line.claim_id))


async def _before_line_delete(call: HandlerCall, line: ClaimLine) -> None:
    _draft_only(await _claim(call, line.claim_id), "claim lines")


async def _before_payer_delete(call: HandlerCall, payer: Payer) -> None:
    held = await dependants(call, ("claim", Claim, Claim.payer_id == payer.id),
                            ("patient", Patient, Patient.payer_id == payer.id))
    if held:
        raise Conflict(f"payer {payer.code} has {held}; set it inactive instead")


async def _before_patient_delete(call: HandlerCall, patient: Patient) -> None:
    used = (await call.session.execute(select(func.count()).select_from(Claim).where(
        Claim.patient_id == patient.id))).scalar_one()
    if used:
        raise Conflict(f"patient {patient.member_id} has {used} claims and cannot be deleted")


async def _before_claim_delete(call: HandlerCall, claim: Claim) -> None:
    if claim.status not in ("draft", "void"):
        raise Conflict(f"claim {claim.number} is {claim.status}; only draft or void claims can be deleted",
                       code="invalid_transition")


crud(app, Entity(Payer, "payer", "payers", PayerList, search=("name", "code", "contact_email"),
                 orderable=("name", "code", "created_at"), default_ordering="name", create=PayerCreate,
                 update=PayerUpdate, group_by=("status", "kind"), before_delete=_before_payer_delete,
                 keywords=("insurer", "insurance company", "health plan", "insurance provider", "carrier")))
crud(app, Entity(Patient, "patient", "patients", PatientList, search=("name", "member_id"),
                 orderable=("name", "member_id", "created_at"), default_ordering="name", create=PatientCreate,
                 update=PatientUpdate, group_by=("status", "payer_id"), prepare=_prepare_patient,
                 before_delete=_before_patient_delete,
                 keywords=("member", "insured person", "policyholder", "beneficiary")))
crud(app, Entity(Claim, "claim", "claims", ClaimList, search=("number", "notes", "denial_reason"),
                 orderable=("number", "service_date", "billed_cents", "created_at", "updated_at"),
                 default_ordering="-created_at", create=ClaimCreate, update=ClaimUpdate,
                 group_by=("status", "payer_id", "currency"), sums=("billed_cents", "approved_cents", "paid_cents"),
                 prepare=_prepare_claim, before_delete=_before_claim_delete,
                 keywords=("insurance claim", "medical billing", "reimbursement", "healthcare claim")))
crud(app, Entity(ClaimLine, "claim_line", "claim lines", ClaimLineList, search=("procedure_code", "description"),
                 orderable=("procedure_code", "amount_cents", "created_at"), default_ordering="created_at",
                 create=ClaimLineCreate, update=ClaimLineUpdate, group_by=("procedure_code", "claim_id"),
                 sums=("amount_cents",), prepare=_prepare_line, after_write=_line_changed,
                 after_delete=_line_changed,
                 before_delete=_before_line_delete,
                 keywords=("procedure", "service line", "billing code", "line item", "charge")))


@app.handler("workflow_action", "claim", "submit", params=ClaimAction, scope="execute",
             description="Submit a draft claim to its payer (needs at least one line and an active payer); "
                         "emits claim.submitted.", keywords=("send claim", "file claim", "bill payer"))
async def submit_claim(call: HandlerCall, p: ClaimAction) -> dict[str, Any]:
    claim = await _claim(call, p.id)
    payer: Payer = await repo(call, Payer, "payer").get(claim.payer_id)
    if claim.status == "draft":
        await _recompute_billed(call, claim)
        lines = (await call.session.execute(select(func.count()).select_from(ClaimLine).where(
            ClaimLine.claim_id == claim.id))).scalar_one()
        if not lines or claim.billed_cents <= 0:
            raise Conflict(f"claim {claim.number} has no billable lines", code="invalid_transition")
        if payer.status != "active":
            raise Conflict(f"payer {payer.code} is inactive", code="invalid_transition")
    move(claim, "submitted", CLAIM_TRANSITIONS, "claim")
    claim.submitted_at = utcnow()
    await call.session.flush()
    await emit_for(call, "claim.submitted", {
        "claim_id": claim.id, "number": claim.number, "status": claim.status, "payer_id": payer.id,
        "payer_name": payer.name, "patient_id": claim.patient_id, "service_date": claim.service_date.isoformat(),
        "billed_cents": claim.billed_cents, "currency": claim.currency, "line_count": lines,
        "submitted_at": iso(claim.submitted_at)})
    return to_record(claim)


@app.handler("workflow_action", "claim", "adjudicate", params=ClaimAdjudicate, scope="execute",
             description="Record the payer's adjudication of a submitted or appealed claim: the approved amount.",
             keywords=("approve claim", "payer decision", "allowed amount"))
async def adjudicate_claim(call: HandlerCall, p: ClaimAdjudicate) -> dict[str, Any]:
    claim = await _claim(call, p.id)
    # The state first: a claim that cannot be adjudicated (a draft) is refused for its state, whatever the amount.
    move(claim, "adjudicated", CLAIM_TRANSITIONS, "claim")
    if p.approved_cents > claim.billed_cents:
        raise Conflict(f"approved amount {p.approved_cents} exceeds the billed {claim.billed_cents}")
    claim.approved_cents, claim.decided_at = p.approved_cents, utcnow()
    await call.session.flush()
    return to_record(claim)


@app.handler("workflow_action", "claim", "deny", params=ClaimDeny, scope="execute",
             description="Record that the payer denied a submitted or appealed claim, with the reason.",
             keywords=("reject claim", "denial", "claim rejected"))
async def deny_claim(call: HandlerCall, p: ClaimDeny) -> dict[str, Any]:
    claim = await _claim(call, p.id)
    move(claim, "denied", CLAIM_TRANSITIONS, "claim")
    claim.denial_reason, claim.approved_cents, claim.decided_at = p.reason, 0, utcnow()
    await call.session.flush()
    return to_record(claim)


@app.handler("workflow_action", "claim", "appeal", params=ClaimAppeal, scope="execute",
             description="Appeal a denied claim; the payer then adjudicates or denies it again.",
             keywords=("dispute denial", "reconsideration"))
async def appeal_claim(call: HandlerCall, p: ClaimAppeal) -> dict[str, Any]:
    claim = await _claim(call, p.id)
    move(claim, "appealed", CLAIM_TRANSITIONS, "claim")
    claim.notes = (claim.notes + "\n" if claim.notes else "") + f"Appeal: {p.reason}"
    await call.session.flush()
    return to_record(claim)


@app.handler("workflow_action", "claim", "pay", params=ClaimPay, scope="execute",
             description="Record a payer payment on an adjudicated claim; the claim is paid once the approved "
                         "amount is fully received.", keywords=("remittance", "claim payment", "reimbursed"))
async def pay_claim(call: HandlerCall, p: ClaimPay) -> dict[str, Any]:
    claim = await _claim(call, p.id)
    if claim.status != "adjudicated":
        move(claim, "paid", CLAIM_TRANSITIONS, "claim")  # refuses with the allowed moves
    outstanding = claim.approved_cents - claim.paid_cents
    amount = p.amount_cents or outstanding
    if amount > outstanding:
        raise Conflict(f"payment {amount} exceeds the {outstanding} still unpaid on claim {claim.number}")
    claim.paid_cents += amount
    if claim.paid_cents == claim.approved_cents:
        move(claim, "paid", CLAIM_TRANSITIONS, "claim")
        claim.paid_at = utcnow()
    await call.session.flush()
    return to_record(claim)


@app.handler("workflow_action", "claim", "void", params=ClaimAction, scope="execute", destructive=True,
             description="Void a draft claim that will not be submitted.", keywords=("cancel claim",))
async def void_claim(call: HandlerCall, p: ClaimAction) -> dict[str, Any]:
    claim = await _claim(call, p.id)
    move(claim, "void", CLAIM_TRANSITIONS, "claim")
    await call.session.flush()
    return to_record(claim)


@app.handler("smart_action", "claim", "copyAsDraft", params=ClaimCopy, scope="execute",
             permission="claims.add_claim",
             description="Copy a claim and all its lines into a new draft claim (to correct and resubmit a "
                         "denied claim).", keywords=("resubmit", "corrected claim", "duplicate claim"))
async def copy_claim(call: HandlerCall, p: ClaimCopy) -> dict[str, Any]:
    source = await _claim(call, p.id)
    copy = repo(call, Claim, "claim").add(
        number=p.number, payer_id=source.payer_id, patient_id=source.patient_id, service_date=source.service_date,
        currency=source.currency, billed_cents=source.billed_cents, notes=f"Copy of claim {source.number}")
    await call.session.flush()
    lines = (await call.session.execute(repo(call, ClaimLine, "claim_line").base().where(
        ClaimLine.claim_id == source.id).order_by(ClaimLine.created_at, ClaimLine.id))).scalars().all()
    for line in lines:
        repo(call, ClaimLine, "claim_line").add(
            claim_id=copy.id, procedure_code=line.procedure_code, description=line.description,
            quantity=line.quantity, unit_price_cents=line.unit_price_cents, amount_cents=line.amount_cents)
    await call.session.flush()
    return {**to_record(copy), "line_count": len(lines)}


@app.handler("report_query", "claim", "byPayer", params=PayerSummaryParams, scope="read",
             permission="claims.view_claim",
             description="Claims per payer: counts by state, billed, approved and paid amounts, and the denial "
                         "rate of decided claims.",
                         keywords=("denial rate", "payer performance", "claims report", "rejection rate",
                                   "insurer comparison"))
async def payer_summary(call: HandlerCall, p: PayerSummaryParams) -> dict[str, Any]:
    denied = func.sum(case((Claim.status == "denied", 1), else_=0))
    decided = func.sum(case((Claim.status.in_(("adjudicated", "denied", "paid")), 1), else_=0))
    stmt = (select(Payer.id, Payer.name, Claim.currency, func.count(), denied, decided,
                   *exact_sum(Claim.billed_cents), *exact_sum(Claim.approved_cents), *exact_sum(Claim.paid_cents))
            .join(Payer, Payer.id == Claim.payer_id)
            .where(Claim.status != "void")
            .group_by(Payer.id, Payer.name, Claim.currency).order_by(Payer.name, Claim.currency))
    if p.payer_id:
        stmt = stmt.where(Claim.payer_id == p.payer_id)
    if p.service_date_after:
        stmt = stmt.where(Claim.service_date > p.service_date_after)
    rows = (await call.session.execute(stmt)).all()
    payers = [{"payer_id": r[0], "payer_name": r[1], "currency": r[2], "claims": r[3], "denied": int(r[4]),
               "decided": int(r[5]), "denial_rate": round(int(r[4]) / int(r[5]), 4) if r[5] else None,
               "billed_cents": total(r[6], r[7]), "approved_cents": total(r[8], r[9]),
               "paid_cents": total(r[10], r[11])} for r in rows]
    return {"payers": payers, "amounts_in": "cents"}


@app.handler("report_query", "claim", "receivablesAging", params=ClaimAgingParams, scope="read",
             permission="claims.view_claim",
             description="Money still expected from payers, by days since submission (current, 1-30 ... over 90): "
                         "billed amounts of claims awaiting a decision, unpaid approved amounts of adjudicated ones.",
             keywords=("accounts receivable", "unpaid claims", "outstanding from insurers", "ar aging"))
async def receivables_aging(call: HandlerCall, p: ClaimAgingParams) -> dict[str, Any]:
    as_of = p.as_of or datetime.now(UTC).date()
    stmt = repo(call, Claim, "claim").base().where(Claim.status.in_(("submitted", "appealed", "adjudicated")))
    if p.payer_id:
        stmt = stmt.where(Claim.payer_id == p.payer_id)
    totals: dict[str, dict[str, int]] = {}
    count = 0
    for claim in (await call.session.execute(stmt)).scalars():
        open_cents = (claim.approved_cents - claim.paid_cents if claim.status == "adjudicated"
                      else claim.billed_cents)
        if open_cents <= 0 or claim.submitted_at is None:
            continue
        count += 1
        row = totals.setdefault(claim.currency, dict.fromkeys((*BUCKETS, "total"), 0))
        row[bucket_of((as_of - claim.submitted_at.date()).days)] += open_cents
        row["total"] += open_cents
    return {"as_of": as_of.isoformat(), "amounts_in": "cents", "claim_count": count, "buckets": list(BUCKETS),
            "by_currency": [{"currency": c, **shown(t)} for c, t in sorted(totals.items())]}
