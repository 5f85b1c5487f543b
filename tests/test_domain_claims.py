"""claims: the claim lifecycle, its refusals, claim.submitted, the payer report, organization isolation."""

from __future__ import annotations

from typing import Any

import httpx

from prism.storage import Database
from tests.domain_support import Caller, events
from tests.factories import Factory


async def _draft(c: Caller, number: str = "CLM-1") -> tuple[dict[str, Any], dict[str, Any]]:
    payer = await c.create("claims", "payer", {"code": "BCX", "name": "Blue Cross Example"})
    patient = await c.create("claims", "patient", {"member_id": "M-100", "name": "Ada Lovelace",
                                                   "payer_id": payer["id"]})
    claim = await c.create("claims", "claim", {"number": number, "payer_id": payer["id"], "patient_id": patient["id"],
                                               "service_date": "2024-03-01"})
    return payer, claim


async def test_submitting_a_claim_emits_claim_submitted_and_it_moves_to_paid(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    payer, claim = await _draft(c)
    assert claim["status"] == "draft" and claim["billed_cents"] == 0
    await c.refused(409, "invalid_transition", "workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
    line = await c.create("claims", "claim_line", {"claim_id": claim["id"], "procedure_code": "99213",
                                                   "quantity": 2, "unit_price_cents": 12_500})
    assert line["amount_cents"] == 25_000
    await c.ok("entity_crud", "claims", "claim_line", "update", {"id": line["id"], "quantity": 3})
    assert (await c.read("claims", "claim", claim["id"]))["billed_cents"] == 37_500
    submitted = await c.ok("workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
    assert submitted["status"] == "submitted" and submitted["submitted_at"]
    [event] = await events(db, ws.org.id, "claim.submitted")
    assert event["data"] == {
        "claim_id": claim["id"], "number": "CLM-1", "status": "submitted", "payer_id": payer["id"],
        "payer_name": "Blue Cross Example", "patient_id": claim["patient_id"], "service_date": "2024-03-01",
        "billed_cents": 37_500, "currency": "USD", "line_count": 1, "submitted_at": submitted["submitted_at"]}
    # Lines of a submitted claim are frozen; it cannot be submitted twice.
    await c.refused(409, "invalid_transition", "entity_crud", "claims", "claim_line", "create",
                    {"claim_id": claim["id"], "procedure_code": "1", "unit_price_cents": 1})
    await c.refused(409, "invalid_transition", "workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
    await c.refused(409, "invalid_transition", "workflow_action", "claims", "claim", "pay", {"id": claim["id"]})
    await c.refused(409, "conflict", "workflow_action", "claims", "claim", "adjudicate",
                    {"id": claim["id"], "approved_cents": 40_000})
    await c.ok("workflow_action", "claims", "claim", "adjudicate", {"id": claim["id"], "approved_cents": 30_000})
    partial = await c.ok("workflow_action", "claims", "claim", "pay", {"id": claim["id"], "amount_cents": 10_000})
    assert (partial["status"], partial["paid_cents"]) == ("adjudicated", 10_000)
    paid = await c.ok("workflow_action", "claims", "claim", "pay", {"id": claim["id"]})
    assert (paid["status"], paid["paid_cents"]) == ("paid", 30_000)
    assert len(await events(db, ws.org.id, "claim.submitted")) == 1


async def test_a_denied_claim_is_appealed_or_copied_into_a_new_draft(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    payer, claim = await _draft(c)
    await c.create("claims", "claim_line", {"claim_id": claim["id"], "procedure_code": "A1", "unit_price_cents": 900})
    await c.ok("workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
    denied = await c.ok("workflow_action", "claims", "claim", "deny", {"id": claim["id"], "reason": "not covered"})
    assert denied["denial_reason"] == "not covered"
    copy = await c.ok("smart_action", "claims", "claim", "copyAsDraft", {"id": claim["id"], "number": "CLM-1B"})
    assert (copy["status"], copy["billed_cents"], copy["line_count"]) == ("draft", 900, 1)
    await c.ok("workflow_action", "claims", "claim", "appeal", {"id": claim["id"], "reason": "covered by rider"})
    await c.ok("workflow_action", "claims", "claim", "deny", {"id": claim["id"], "reason": "still not covered"})
    await c.refused(409, "invalid_transition", "workflow_action", "claims", "claim", "void", {"id": claim["id"]})
    await c.refused(409, "invalid_transition", "entity_crud", "claims", "claim", "delete", {"id": claim["id"]})
    await c.refused(409, "conflict", "entity_crud", "claims", "payer", "delete", {"id": payer["id"]})
    report = await c.ok("report_query", "claims", "claim", "byPayer", {})
    [row] = report["payers"]
    assert (row["claims"], row["denied"], row["decided"], row["denial_rate"]) == (2, 1, 1, 1.0)
    breakdown = await c.ok("report_query", "claims", "claim", "breakdown", {"by": "status"})
    assert {g["value"]: g["count"] for g in breakdown["groups"]} == {"denied": 1, "draft": 1}


async def test_another_organizations_claims_are_not_found_and_not_reported(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs = Caller(client, (await factory.workspace(roles=("owner",))))
    their_payer, their_claim = await _draft(theirs)
    await theirs.create("claims", "claim_line", {"claim_id": their_claim["id"], "procedure_code": "X",
                                                 "unit_price_cents": 5})
    for operation in ("submit", "void"):
        await mine.refused(404, "not_found", "workflow_action", "claims", "claim", operation, {"id": their_claim["id"]})
    await mine.refused(404, "not_found", "entity_crud", "claims", "claim_line", "create",
                       {"claim_id": their_claim["id"], "procedure_code": "X", "unit_price_cents": 5})
    my_patient = await mine.create("claims", "patient", {"member_id": "M-1", "name": "Me"})
    await mine.refused(404, "not_found", "entity_crud", "claims", "claim", "create", {
        "number": "C", "payer_id": their_payer["id"], "patient_id": my_patient["id"], "service_date": "2024-01-01"})
    assert (await mine.ok("report_query", "claims", "claim", "byPayer", {}))["payers"] == []
    assert (await mine.ok("entity_crud", "claims", "claim", "count", {}))["count"] == 0
    assert (await theirs.read("claims", "claim", their_claim["id"]))["status"] == "draft"


async def test_receivables_aging_counts_what_payers_still_owe_by_age(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    _, claim = await _draft(c)
    await c.create("claims", "claim_line", {"claim_id": claim["id"], "procedure_code": "A", "unit_price_cents": 1_000})
    aging = await c.ok("report_query", "claims", "claim", "receivablesAging", {})
    assert aging["claim_count"] == 0  # drafts owe nothing
    submitted = await c.ok("workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
    day = submitted["submitted_at"][:10]
    aging = await c.ok("report_query", "claims", "claim", "receivablesAging", {"as_of": day})
    assert aging["by_currency"] == [{"currency": "USD", "current": 1_000, "days_1_30": 0, "days_31_60": 0,
                                     "days_61_90": 0, "days_over_90": 0, "total": 1_000}]
    await c.ok("workflow_action", "claims", "claim", "adjudicate", {"id": claim["id"], "approved_cents": 800})
    await c.ok("workflow_action", "claims", "claim", "pay", {"id": claim["id"], "amount_cents": 300})
    later = f"{int(day[:4]) + 1}{day[4:]}"
    aging = await c.ok("report_query", "claims", "claim", "receivablesAging", {"as_of": later})
    assert aging["by_currency"][0]["days_over_90"] == 500 and aging["claim_count"] == 1
