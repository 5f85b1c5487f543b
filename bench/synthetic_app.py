"""Synthetic handler apps for the registry-scale benchmark: N handlers shaped like a real surface.

40 apps, each with entities drawn from a shared business vocabulary, ten operations per entity
spread over all 13 mega-tools (six CRUD, two workflow steps, one report, one from the rest), with
written-out descriptions, keywords and a small typed parameter model per handler, declared on
`prism.registry.Params` as docs/extending.md tells every app to.

    PRISM_APPS=$(python -c "from bench.synthetic_app import specs; print(specs())")

Settings come from the environment because Prism imports this module by name inside its server:
PRISM_BENCH_HANDLERS (default 10000) and PRISM_BENCH_PARAMS: `distinct` (default, one model class per
handler) or `shared` (one class per parameter shape, as hand-written apps tend to reuse them).
"""

from __future__ import annotations

import datetime as dt
import os
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from prism.registry import HandlerApp, HandlerCall, Params

APPS: dict[str, str] = {
    "accounts_payable": "Supplier bills, payment runs and approvals", "accounts_receivable": "Customer billing",
    "procurement": "Requisitions, sourcing and purchasing", "inventory": "Stock levels and movements",
    "warehouse": "Bins, picking and put-away", "fleet": "Vehicles, drivers and fuel", "upkeep": "Plant upkeep",
    "quality": "Inspections, non-conformities and corrective actions", "compliance": "Controls and evidence",
    "legal": "Matters, contracts and counsel", "projects": "Projects, milestones and tasks",
    "timesheets": "Time capture and approval", "expenses": "Employee expenses and reimbursements",
    "assets": "Fixed assets and depreciation", "facilities": "Buildings, rooms and work spaces",
    "helpdesk": "Customer support cases", "it_service": "IT service management: incidents, problems, changes",
    "crm": "Customers, contacts and relationships", "sales": "Pipeline, quotes and orders",
    "marketing": "Campaigns, audiences and leads", "contracts": "Contract lifecycle and renewals",
    "recruiting": "Candidates, postings and interviews", "learning": "Courses, enrolments and certificates",
    "payroll": "Pay runs, payslips and deductions", "hr": "Employees, positions and leave",
    "manufacturing": "Work orders, routings and batches", "logistics": "Routes, carriers and dispatch",
    "shipping": "Shipments, parcels and labels", "returns": "Return authorisations and refunds",
    "billing": "Usage, invoices and dunning", "subscriptions": "Plans, renewals and churn",
    "tax": "Tax codes, filings and returns", "treasury": "Cash positions, bank accounts and transfers",
    "budgeting": "Budgets, forecasts and variances", "risk": "Risk register and mitigations",
    "safety": "Incidents, hazards and permits to work", "environment": "Emissions, waste and permits",
    "energy": "Meters, readings and tariffs", "research": "Experiments, samples and results",
    "field_service": "Technicians, visits and service reports",
}

ENTITIES = (
    "purchase_order invoice vendor payment credit_note receipt ticket incident problem change_request asset "
    "contract employee shift vehicle route shipment return_order customer lead opportunity campaign case sensor "
    "meter reading inspection audit finding risk control policy training_course certificate budget forecast "
    "expense_report refund subscription plan quote product batch lot bin location work_order task milestone "
    "project timesheet document template report_definition alert approval requisition supplier_rating claim "
    "warranty calibration permit hazard emission_record energy_reading experiment sample candidate job_posting "
    "interview onboarding_plan").split()

CRUD = ("list", "read", "create", "update", "delete", "count")
WORKFLOW = ("submit", "approve", "reject", "close", "reopen", "escalate", "assign", "cancel")
REPORTS = ("summary", "aging", "trend", "breakdown", "forecast", "variance")
# One extra operation per entity, rotating over the mega-tools the CRUD/workflow/report set leaves out.
EXTRAS = (("smart_action", "reconcile"), ("agent_command", "delegate"), ("integration_call", "sync"),
          ("document_op", "attach"), ("config_manage", "configure"), ("notification_send", "notify_owner"),
          ("mission_control", "plan_mission"), ("governance_review", "request_review"),
          ("audit_query", "history"), ("knowledge_query", "ask"))
OPS_PER_ENTITY = len(CRUD) + 2 + 1 + 1

DESCRIPTIONS = {
    "list": "List {plural} in {app}, filtered by status, owner and date range, with search and ordering.",
    "read": "Read one {label} by id, with its current status, owner and linked records.",
    "create": "Create a {label} in {app}; required fields are checked and the caller becomes its owner.",
    "update": "Change fields of a {label} (name, amount, due date, owner); untouched fields stay as they are.",
    "delete": "Delete a {label} permanently; refused while open approvals or postings reference it.",
    "count": "Count {plural} matching a status and a creation date, for dashboards and quick checks.",
    "submit": "Submit a draft {label} for approval; it becomes read-only until approved or rejected.",
    "approve": "Approve a submitted {label}; the approval is recorded with the approver and a comment.",
    "reject": "Reject a submitted {label} with a reason; it goes back to draft for its owner.",
    "close": "Close a {label} once its work is done; closed records leave the open queues.",
    "reopen": "Reopen a closed {label} when follow-up work is needed.",
    "escalate": "Escalate a {label} to the next support level or manager, with a priority and a reason.",
    "assign": "Assign a {label} to a person or team; the assignee is notified.",
    "cancel": "Cancel a {label} that is no longer needed; cancelled records keep their history.",
    "summary": "Summary report of {plural} in {app}: totals by status and owner over a period.",
    "aging": "Aging report of open {plural}: amounts bucketed by days outstanding (0-30, 31-60, 61-90, 90+).",
    "trend": "Trend of new and closed {plural} per week or month over a period.",
    "breakdown": "Breakdown of {plural} by a chosen dimension (status, owner, location, category).",
    "forecast": "Forecast of {plural} volume and amounts for the coming periods from recent history.",
    "variance": "Variance of {plural} against plan or budget, per period, with the largest deviations.",
    "reconcile": "Reconcile {plural} against an external statement and flag mismatches for review.",
    "delegate": "Hand a {label} to an agent instance that works it to completion within a budget.",
    "sync": "Synchronise {plural} with the connected external system of record.",
    "attach": "Attach a document to a {label} and extract its text for search.",
    "configure": "Configure how {plural} behave in {app}: numbering, default owner and required fields.",
    "notify_owner": "Notify the owner of a {label} by email or chat, with a short message.",
    "plan_mission": "Plan a mission that processes a batch of {plural} under a cost ceiling.",
    "request_review": "Ask a human to review a pending action on a {label} before it runs.",
    "history": "The audit history of a {label}: who did what and when, from the ledger.",
    "ask": "Answer a question about {plural} from the knowledge base of {app} documents.",
}


def plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "ch", "sh", "x")) else "s")


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# Parameter shapes: name -> fields. `distinct` mode builds one class per handler from these.
Str = (str | None, Field(None, max_length=255))
Id = (str, Field(..., min_length=1, max_length=64, description="Record id."))
SHAPES: dict[str, dict[str, Any]] = {
    "list": {"page": (int, Field(1, ge=1, le=1_000_000)), "page_size": (int, Field(20, ge=1, le=100)),
             "search": (str | None, Field(None, max_length=200)), "status": Str, "owner_email": Str},
    "by_id": {"id": Id},
    "create": {"name": (str, Field(..., min_length=1, max_length=255)),
               "description": (str, Field("", max_length=5000)), "amount_cents": (int, Field(0, ge=0, le=10**12)),
               "due_date": (dt.date | None, None), "owner_email": Str},
    "update": {"id": Id, "name": Str, "amount_cents": (int | None, Field(None, ge=0, le=10**12)),
               "due_date": (dt.date | None, None), "owner_email": Str},
    "count": {"status": Str, "created_after": (dt.date | None, None)},
    "transition": {"id": Id, "comment": (str, Field("", max_length=2000))},
    "report": {"date_from": (dt.date | None, None), "date_to": (dt.date | None, None),
               "group_by": (Literal["status", "owner", "month"], "status")},
    "action": {"id": Id, "dry_run": (bool, False), "note": (str, Field("", max_length=2000))},
}
SHAPE_OF = {"list": "list", "read": "by_id", "delete": "by_id", "create": "create", "update": "update",
            "count": "count", **dict.fromkeys(WORKFLOW, "transition"), **dict.fromkeys(REPORTS, "report")}


@cache
def _shared_model(shape: str) -> type[BaseModel]:
    return create_model(f"Synthetic{camel(shape)}Params", __base__=Params, **SHAPES[shape])


def params_model(app: str, entity: str, operation: str, *, distinct: bool) -> type[BaseModel]:
    shape = SHAPE_OF.get(operation, "action")
    if not distinct:
        return _shared_model(shape)
    return create_model(f"{camel(app)}{camel(entity)}{camel(operation)}Params", __base__=Params, **SHAPES[shape])


async def answer(call: HandlerCall, params: BaseModel) -> dict[str, Any]:
    """Every synthetic handler echoes its coordinate; the benchmark measures the registry, not this."""
    return {"handler": call.handler.path, "arguments": params.model_dump(mode="json")}


def operations_for(index: int) -> list[tuple[str, str]]:
    """Ten (mega_tool, operation) pairs for the index-th entity, varied from one entity to the next."""
    pairs = [("entity_crud", op) for op in CRUD]
    pairs += [("workflow_action", WORKFLOW[(index + k) % len(WORKFLOW)]) for k in (0, 3)]
    pairs.append(("report_query", REPORTS[index % len(REPORTS)]))
    pairs.append(EXTRAS[index % len(EXTRAS)])
    return pairs


@cache
def build(count: int, distinct: bool) -> dict[str, HandlerApp]:
    apps = {name: HandlerApp(name, description=text) for name, text in APPS.items()}
    per_app = -(-count // (len(apps) * OPS_PER_ENTITY))
    made = 0
    for a, (name, app) in enumerate(apps.items()):
        app_label = name.replace("_", " ")
        for e in range(per_app):
            raw = ENTITIES[(a * 7 + e) % len(ENTITIES)]
            entity = raw if e < len(ENTITIES) else f"{raw}_{e // len(ENTITIES) + 1}"
            label = raw.replace("_", " ")
            for mega_tool, operation in operations_for(a * per_app + e):
                if made == count:
                    return apps
                app.handler(
                    mega_tool, entity, operation,
                    params=params_model(name, entity, operation, distinct=distinct),
                    scope="read" if operation in ("list", "read", "count", *REPORTS, "history", "ask") else
                    "write" if mega_tool == "entity_crud" else "execute",
                    description=DESCRIPTIONS[operation].format(label=label, plural=plural(label), app=app_label),
                    keywords=(label, app_label, operation.replace("_", " ")),
                    cost=1 + made % 5,
                )(answer)
                made += 1
    return apps


def configured() -> dict[str, HandlerApp]:
    return build(int(os.environ.get("PRISM_BENCH_HANDLERS", "10000")),
                 os.environ.get("PRISM_BENCH_PARAMS", "distinct") == "distinct")


def specs() -> str:
    """The PRISM_APPS value that loads every synthetic app."""
    return ",".join(f"{__name__}:{name}" for name in APPS)


def __getattr__(name: str) -> HandlerApp:
    """`bench.synthetic_app:<app>` specs resolve here (PEP 562), building the apps on first use."""
    if name in APPS:
        return configured()[name]
    raise AttributeError(name)
