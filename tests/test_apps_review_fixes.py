"""Findings of a review of the business handlers (src/prism/apps), each kept fixed: a report that summarised only
the oldest 50,000 readings, a statement that invented a negative balance, ticket numbers given twice, priorities
ordered by spelling, deletes refused with a bare foreign-key conflict, a claim refused for its amount rather than its
state, and an escalation that kept the old priority's deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import insert, select

from prism.apps.itsm.models import Ticket
from prism.apps.maintenance.models import MeterReading
from prism.kit.ids import new_id
from prism.kit.timeutil import utcnow
from prism.models import User
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.test_console_oversight_inbox_order import _request

GENERIC = "the change conflicts with an existing record"


async def _owner(factory: Factory, client: httpx.AsyncClient) -> Caller:
    return Caller(client, await factory.workspace(roles=("owner",)))


# 1. meter_reading/trend


async def test_the_meter_trend_summarises_every_reading_past_50000_and_names_the_newest(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    # It read the readings oldest first and stopped at 50,000: past that, latest, max, count (and min, average)
    # described the oldest 50,000 and the newest readings were left out.
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    pump = await c.create("maintenance", "asset", {"tag": "PMP-1", "name": "Pump"})
    start = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [{"id": new_id(), "organization_id": ws.org.id, "asset_id": pump["id"], "meter": "run_hours",
             "value": float(i + 1), "unit": "h", "read_at": start + timedelta(minutes=i), "created_at": start}
            for i in range(50_000)]
    async with db.write() as s:
        await s.execute(insert(MeterReading.__table__), rows)
    await c.create("maintenance", "meter_reading", {"asset_id": pump["id"], "meter": "run_hours", "value": 0.5,
                                                    "unit": "hours", "read_at": "2030-01-01T00:00:00Z"})
    # An older reading written later is not the latest; another series is summarised on its own.
    await c.create("maintenance", "meter_reading", {"asset_id": pump["id"], "meter": "run_hours", "value": 7.0,
                                                    "unit": "h", "read_at": "2023-01-01T00:00:00Z"})
    await c.create("maintenance", "meter_reading", {"asset_id": pump["id"], "meter": "vibration", "value": 2.0,
                                                    "unit": "mm/s", "read_at": "2024-06-01T00:00:00Z"})
    trend = await c.ok("report_query", "maintenance", "meter_reading", "trend", {"asset_id": pump["id"]})
    assert trend["series"] == [
        {"asset_id": pump["id"], "meter": "run_hours", "unit": "hours", "readings": 50_002, "min": 0.5,
         "max": 50_000.0, "average": round((50_000 * 50_001 / 2 + 0.5 + 7.0) / 50_002, 6), "latest": 0.5,
         "latest_at": "2030-01-01T00:00:00Z"},
        {"asset_id": pump["id"], "meter": "vibration", "unit": "mm/s", "readings": 1, "min": 2.0, "max": 2.0,
         "average": 2.0, "latest": 2.0, "latest_at": "2024-06-01T00:00:00Z"}]
    recent = await c.ok("report_query", "maintenance", "meter_reading", "trend",
                        {"meter": "run_hours", "read_at_after": "2029-01-01T00:00:00Z"})
    assert [(s["readings"], s["latest"]) for s in recent["series"]] == [(1, 0.5)]


# 2. vendor/statement with `since`


async def test_a_statement_since_a_date_carries_the_balance_before_it_and_never_goes_negative(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # An invoice issued in January and paid in March: nothing is owed. Listed from February, the statement counted
    # the March payment without the January invoice and said the vendor owed us 10.00.
    c = await _owner(factory, client)
    vendor = await c.create("finance", "vendor", {"name": "Acme"})
    paid = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": "I-1", "amount_cents": 1000,
                                                 "issue_date": "2024-01-10", "due_date": "2024-02-10"})
    await c.ok("smart_action", "finance", "invoice", "payInFull", {"id": paid["id"], "paid_on": "2024-03-01"})
    await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": "I-2", "amount_cents": 250,
                                          "currency": "EUR", "issue_date": "2024-01-20", "due_date": "2024-02-20"})
    void = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": "I-3", "amount_cents": 99,
                                                 "issue_date": "2024-01-25", "due_date": "2024-02-25"})
    await c.ok("workflow_action", "finance", "invoice", "void", {"id": void["id"], "reason": "duplicate"})
    later = await c.create("finance", "invoice", {"vendor_id": vendor["id"], "number": "I-4", "amount_cents": 400,
                                                  "issue_date": "2024-04-01", "due_date": "2024-05-01"})
    owed = [{"currency": "EUR", "amount_cents": 250}, {"currency": "USD", "amount_cents": 400}]
    whole = await c.ok("report_query", "finance", "vendor", "statement", {"vendor_id": vendor["id"]})
    assert (whole["open_balance_cents"], whole["opening_balance_cents"]) == (owed, [])
    since = await c.ok("report_query", "finance", "vendor", "statement",
                       {"vendor_id": vendor["id"], "since": "2024-02-01"})
    assert [i["id"] for i in since["invoices"]] == [later["id"]]
    assert [x["amount_cents"] for x in since["payments"]] == [1000]
    assert since["opening_balance_cents"] == [{"currency": "EUR", "amount_cents": 250},
                                              {"currency": "USD", "amount_cents": 1000}]
    assert since["open_balance_cents"] == owed


# 3. ticket numbers


async def test_a_deleted_tickets_number_is_never_given_to_another_ticket(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = await _owner(factory, client)
    first = await c.create("itsm", "ticket", {"title": "printer"})
    second = await c.create("itsm", "ticket", {"title": "duplicate of printer"})
    await c.ok("workflow_action", "itsm", "ticket", "cancel", {"id": second["id"], "reason": "duplicate"})
    await c.ok("entity_crud", "itsm", "ticket", "delete", {"id": second["id"]})
    third = await c.create("itsm", "ticket", {"title": "vpn"})
    assert (first["number"], second["number"], third["number"]) == (1, 2, 3)
    other = await _owner(factory, client)  # every organization counts its own
    assert (await other.create("itsm", "ticket", {"title": "mine"}))["number"] == 1


async def test_tickets_stored_without_a_counter_are_counted_on_from(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    # Tickets written without the handler (seeded ones) have no counter yet: the next number follows the highest.
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as s:
        s.add(Ticket(organization_id=ws.org.id, number=7, title="seeded"))
    assert (await Caller(client, ws).create("itsm", "ticket", {"title": "new"}))["number"] == 8


# 4. ordering by ranked words


async def _listed(c: Caller, app: str, entity: str, field: str, ordering: str) -> list[str]:
    page = await c.ok("entity_crud", app, entity, "list", {"ordering": ordering})
    return [item[field] for item in page["items"]]


async def test_priorities_criticalities_and_tiers_are_ordered_by_rank_not_by_spelling(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = await _owner(factory, client)
    for criticality in ("medium", "low", "high"):
        asset = await c.create("maintenance", "asset", {"tag": criticality, "name": "Pump",
                                                        "criticality": criticality})
    for priority in ("low", "urgent", "medium", "high"):
        await c.create("maintenance", "work_order", {"asset_id": asset["id"], "title": priority, "priority": priority})
    channel = await c.create("notifications", "channel", {"name": "#ops"})
    for priority in ("normal", "urgent", "low", "high"):
        await c.ok("notification_send", "notifications", "notification", "send",
                   {"channel_id": channel["id"], "subject": priority, "priority": priority})
    for tier in ("standard", "critical", "low"):
        await c.create("itsm", "service", {"name": tier, "tier": tier})
    assert await _listed(c, "maintenance", "work_order", "priority", "-priority") == ["urgent", "high", "medium", "low"]
    assert await _listed(c, "maintenance", "work_order", "priority", "priority") == ["low", "medium", "high", "urgent"]
    assert await _listed(c, "maintenance", "asset", "criticality", "-criticality") == ["high", "medium", "low"]
    assert await _listed(c, "notifications", "notification", "priority", "-priority") == [
        "urgent", "high", "normal", "low"]
    assert await _listed(c, "itsm", "service", "tier", "-tier") == ["critical", "standard", "low"]
    assert await _listed(c, "itsm", "service", "tier", "tier") == ["low", "standard", "critical"]


async def test_oversight_requests_are_ordered_by_priority_rank(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    now = utcnow()
    async with db.write() as s:
        owner = (await s.execute(select(User).where(User.email == ws.emails["owner"]))).scalar_one()
        for priority in ("normal", "critical", "low", "high"):
            s.add(_request(ws, owner.id, "pending", now, priority=priority))
    c = Caller(client, ws)
    page = await c.ok("governance_review", "governance", "oversight_request", "list", {"ordering": "-priority"})
    assert [r["priority"] for r in page["items"]] == ["critical", "high", "normal", "low"]


# 5. deletes refused because of dependants


async def _refused_delete(c: Caller, app: str, entity: str, record: dict[str, Any]) -> str:
    message = await c.refused(409, "conflict", "entity_crud", app, entity, "delete", {"id": record["id"]})
    assert message != GENERIC
    return message


async def test_deletes_refused_for_dependants_name_them_and_say_what_to_do(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # docs/domain.md: deletes that would orphan other records are refused with 409 conflict "and say what to do
    # instead". These reached the database's foreign key and answered only "the change conflicts ...".
    c = await _owner(factory, client)
    asset = await c.create("maintenance", "asset", {"tag": "A-1", "name": "Pump"})
    plan = await c.create("maintenance", "plan", {"asset_id": asset["id"], "title": "Grease", "interval_days": 30,
                                                  "next_due": "2024-01-01"})
    assert await _refused_delete(c, "maintenance", "asset", asset) == (
        "asset A-1 has 1 maintenance plan; retire it instead")
    await c.ok("smart_action", "maintenance", "plan", "generateDueWorkOrders", {"as_of": "2024-01-02"})
    assert await _refused_delete(c, "maintenance", "plan", plan) == (
        "plan 'Grease' generated 1 work order; pause it instead (active: false)")
    assert await _refused_delete(c, "maintenance", "asset", asset) == (
        "asset A-1 has 1 work order and 1 maintenance plan; retire it instead")

    payer = await c.create("claims", "payer", {"code": "P1", "name": "Payer"})
    for n in (1, 2):
        await c.create("claims", "patient", {"member_id": f"M{n}", "name": "Pat", "payer_id": payer["id"]})
    assert await _refused_delete(c, "claims", "payer", payer) == "payer P1 has 2 patients; set it inactive instead"

    vendor = await c.create("finance", "vendor", {"name": "Acme"})
    await c.create("finance", "purchase_order", {"vendor_id": vendor["id"], "number": "PO-1", "amount_cents": 5})
    assert await _refused_delete(c, "finance", "vendor", vendor) == (
        "vendor Acme has 1 purchase order; set it inactive instead")

    channel = await c.create("notifications", "channel", {"name": "#ops"})
    await c.ok("notification_send", "notifications", "notification", "send",
               {"channel_id": channel["id"], "subject": "hello"})
    assert await _refused_delete(c, "notifications", "channel", channel) == (
        "channel #ops has 1 notification; archive it instead")
    template = await c.create("notifications", "template", {"name": "welcome", "subject": "Hi $name", "body": "."})
    await c.ok("notification_send", "notifications", "notification", "sendTemplate",
               {"template_id": template["id"], "channel_id": channel["id"], "variables": {"name": "Ann"}})
    assert await _refused_delete(c, "notifications", "template", template) == (
        "template welcome was sent as 1 notification; archive it instead")


async def test_records_nothing_depends_on_are_still_deleted(client: httpx.AsyncClient, factory: Factory) -> None:
    c = await _owner(factory, client)
    asset = await c.create("maintenance", "asset", {"tag": "A-1", "name": "Pump"})
    plan = await c.create("maintenance", "plan", {"asset_id": asset["id"], "title": "Grease", "interval_days": 30,
                                                  "next_due": "2024-01-01"})
    payer = await c.create("claims", "payer", {"code": "P1", "name": "Payer"})
    vendor = await c.create("finance", "vendor", {"name": "Acme"})
    channel = await c.create("notifications", "channel", {"name": "#ops"})
    template = await c.create("notifications", "template", {"name": "welcome", "subject": "Hi", "body": "."})
    for app, entity, record in (("maintenance", "plan", plan), ("maintenance", "asset", asset),
                                ("claims", "payer", payer), ("finance", "vendor", vendor),
                                ("notifications", "channel", channel), ("notifications", "template", template)):
        assert await c.ok("entity_crud", app, entity, "delete", {"id": record["id"]}) == {
            "id": record["id"], "deleted": True}


# 6. claims: the state machine before the amount


async def test_adjudicating_a_draft_claim_is_refused_for_its_state(client: httpx.AsyncClient,
                                                                   factory: Factory) -> None:
    c = await _owner(factory, client)
    payer = await c.create("claims", "payer", {"code": "P1", "name": "Payer"})
    patient = await c.create("claims", "patient", {"member_id": "M1", "name": "Pat"})
    claim = await c.create("claims", "claim", {"number": "C-1", "payer_id": payer["id"], "patient_id": patient["id"],
                                              "service_date": "2024-01-01"})
    # draft -> adjudicated skips `submitted`: the state machine's refusal, not a complaint about the amount.
    message = await c.refused(409, "invalid_transition", "workflow_action", "claims", "claim", "adjudicate",
                              {"id": claim["id"], "approved_cents": 5})
    assert "cannot go from draft to adjudicated" in message
    await c.create("claims", "claim_line", {"claim_id": claim["id"], "procedure_code": "99213",
                                            "unit_price_cents": 100})
    await c.ok("workflow_action", "claims", "claim", "submit", {"id": claim["id"]})
    # A claim that may be adjudicated is still refused an amount above what was billed, and stays submitted.
    await c.refused(409, "conflict", "workflow_action", "claims", "claim", "adjudicate",
                    {"id": claim["id"], "approved_cents": 101})
    assert (await c.read("claims", "claim", claim["id"]))["status"] == "submitted"


# 7. itsm escalation to a priority without a policy


async def test_escalating_to_a_priority_without_a_policy_leaves_no_deadline(
        client: httpx.AsyncClient, factory: Factory) -> None:
    # A new ticket of a priority with no SLA policy has no deadline; an escalated one kept its old priority's.
    c = await _owner(factory, client)
    await c.create("itsm", "sla_policy", {"priority": "p3", "resolve_hours": 72})
    await c.create("itsm", "sla_policy", {"priority": "p1", "resolve_hours": 4})
    ticket = await c.create("itsm", "ticket", {"title": "outage", "priority": "p4"})
    assert ticket["sla_due_at"] is None
    escalated = await c.ok("workflow_action", "itsm", "ticket", "escalate", {"id": ticket["id"], "priority": "p3"})
    created = datetime.fromisoformat(ticket["created_at"])
    assert datetime.fromisoformat(escalated["sla_due_at"]) == created + timedelta(hours=72)
    escalated = await c.ok("workflow_action", "itsm", "ticket", "escalate", {"id": ticket["id"], "priority": "p2"})
    assert escalated["sla_due_at"] is None
    escalated = await c.ok("workflow_action", "itsm", "ticket", "escalate", {"id": ticket["id"], "priority": "p1"})
    assert datetime.fromisoformat(escalated["sla_due_at"]) == created + timedelta(hours=4)
