"""Parameter models of the claims app (field descriptions feed capability search and OpenAPI)."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field

from prism.apps.params import ListParams, Params

Id = Field(..., min_length=1, max_length=64, description="Record id.")
PayerKind = Literal["commercial", "government", "self_pay", "other"]
ClaimStatus = Literal["draft", "submitted", "adjudicated", "denied", "appealed", "paid", "void"]
Active = Literal["active", "inactive"]


class PayerList(ListParams):
    status: Active | None = Field(None, description="Only payers with this status.")
    kind: PayerKind | None = Field(None, description="Only payers of this kind.")


class PayerCreate(Params):
    code: str = Field(..., min_length=1, max_length=64, description="Payer code, unique per organization.")
    name: str = Field(..., min_length=1, max_length=255, description="Insurance payer name.")
    kind: PayerKind = Field("commercial", description="Kind of payer.")
    contact_email: str = Field("", max_length=320, description="Claims contact address.")


class PayerUpdate(Params):
    id: str = Id
    name: str | None = Field(None, min_length=1, max_length=255, description="Insurance payer name.")
    kind: PayerKind | None = Field(None, description="Kind of payer.")
    contact_email: str | None = Field(None, max_length=320, description="Claims contact address.")
    status: Active | None = Field(None, description="Inactive payers accept no new submissions.")


class PatientList(ListParams):
    payer_id: str | None = Field(None, max_length=64, description="Only patients covered by this payer.")
    status: Active | None = Field(None, description="Only patients with this status.")


class PatientCreate(Params):
    member_id: str = Field(..., min_length=1, max_length=64, description="Insurance member id, unique.")
    name: str = Field(..., min_length=1, max_length=255, description="Patient full name.")
    birth_date: date | None = Field(None, description="Date of birth.")
    payer_id: str | None = Field(None, max_length=64, description="Primary payer covering the patient.")


class PatientUpdate(Params):
    id: str = Id
    name: str | None = Field(None, min_length=1, max_length=255, description="Patient full name.")
    birth_date: date | None = Field(None, description="Date of birth.")
    payer_id: str | None = Field(None, max_length=64, description="Primary payer covering the patient.")
    status: Active | None = Field(None, description="Patient record status.")


class ClaimList(ListParams):
    status: ClaimStatus | None = Field(None, description="Only claims in this state.")
    payer_id: str | None = Field(None, max_length=64, description="Only claims sent to this payer.")
    patient_id: str | None = Field(None, max_length=64, description="Only claims of this patient.")
    service_date_after: date | None = Field(None, description="Only services after this date.")
    service_date_before: date | None = Field(None, description="Only services before this date.")


class ClaimCreate(Params):
    number: str = Field(..., min_length=1, max_length=64, description="Claim number, unique per organization.")
    payer_id: str = Field(..., min_length=1, max_length=64, description="Payer the claim is billed to.")
    patient_id: str = Field(..., min_length=1, max_length=64, description="Patient who received the service.")
    service_date: date = Field(..., description="Date of service.")
    currency: str = Field("USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 currency code.")
    notes: str = Field("", max_length=5000, description="Free-text notes.")


class ClaimUpdate(Params):
    id: str = Id
    payer_id: str | None = Field(None, max_length=64, description="Payer (draft claims only).")
    patient_id: str | None = Field(None, max_length=64, description="Patient (draft claims only).")
    service_date: date | None = Field(None, description="Date of service (draft claims only).")
    notes: str | None = Field(None, max_length=5000, description="Free-text notes.")


class ClaimLineList(ListParams):
    claim_id: str | None = Field(None, max_length=64, description="Only lines of this claim.")
    procedure_code: str | None = Field(None, max_length=32, description="Only lines with this procedure code.")


class ClaimLineCreate(Params):
    claim_id: str = Field(..., min_length=1, max_length=64, description="Draft claim the line belongs to.")
    procedure_code: str = Field(..., min_length=1, max_length=32, description="Procedure code (e.g. CPT).")
    description: str = Field("", max_length=500, description="What was performed.")
    quantity: int = Field(1, ge=1, le=10_000, description="Units performed.")
    unit_price_cents: int = Field(..., ge=0, le=10**10, description="Price per unit in cents.")


class ClaimLineUpdate(Params):
    id: str = Id
    description: str | None = Field(None, max_length=500, description="What was performed.")
    quantity: int | None = Field(None, ge=1, le=10_000, description="Units performed.")
    unit_price_cents: int | None = Field(None, ge=0, le=10**10, description="Price per unit in cents.")


class ClaimAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Claim id.")


class ClaimAdjudicate(ClaimAction):
    approved_cents: int = Field(..., ge=1, le=10**12, description="Amount the payer approved, in cents.")


class ClaimDeny(ClaimAction):
    reason: str = Field(..., min_length=1, max_length=1000, description="Why the payer denied the claim.")


class ClaimAppeal(ClaimAction):
    reason: str = Field(..., min_length=1, max_length=1000, description="Grounds of the appeal.")


class ClaimPay(ClaimAction):
    amount_cents: int | None = Field(None, ge=1, le=10**12,
                                     description="Amount received; default the approved amount still unpaid.")


class ClaimCopy(ClaimAction):
    number: str = Field(..., min_length=1, max_length=64, description="Number of the new draft claim.")


class PayerSummaryParams(Params):
    payer_id: str | None = Field(None, max_length=64, description="Only this payer.")
    service_date_after: date | None = Field(None, description="Only services after this date.")


class ClaimAgingParams(Params):
    as_of: date | None = Field(None, description="Date ages are measured at (default today, UTC).")
    payer_id: str | None = Field(None, max_length=64, description="Only claims of this payer.")
