"""itsm: tickets emit ticket.created, move through their lifecycle with SLA deadlines, and stay in their org."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx

from prism.storage import Database
from tests.domain_support import Caller, events
from tests.factories import Factory


async def test_creating_a_ticket_emits_ticket_created_with_number_and_sla(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    await c.create("itsm", "sla_policy", {"priority": "p1", "resolve_hours": 4})
    service = await c.create("itsm", "service", {"name": "VPN", "tier": "critical"})
    first = await c.create("itsm", "ticket", {"title": "VPN down", "priority": "p1", "service_id": service["id"]})
    second = await c.create("itsm", "ticket", {"title": "New laptop", "kind": "request", "priority": "p4"})
    assert (first["number"], second["number"]) == (1, 2)
    assert first["requester_email"] == ws.emails["owner"] and first["status"] == "new"
    due = datetime.fromisoformat(first["sla_due_at"]) - datetime.fromisoformat(first["created_at"])
    assert abs(due - timedelta(hours=4)) < timedelta(seconds=1) and second["sla_due_at"] is None
    created = await events(db, ws.org.id, "ticket.created")
    assert [e["data"]["ticket_id"] for e in created] == [first["id"], second["id"]]
    assert created[0]["data"] == {
        "ticket_id": first["id"], "number": 1, "title": "VPN down", "kind": "incident", "priority": "p1",
        "status": "new", "service_id": service["id"], "requester_email": ws.emails["owner"],
        "sla_due_at": first["sla_due_at"], "created_at": first["created_at"]}


async def test_a_ticket_is_assigned_resolved_reopened_and_closed_and_refuses_illegal_moves(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    ticket = await c.create("itsm", "ticket", {"title": "Printer jam", "priority": "p3"})
    tid = {"id": ticket["id"]}
    await c.refused(409, "invalid_transition", "workflow_action", "itsm", "ticket", "resolve",
                    {**tid, "resolution": "x"})
    await c.refused(409, "invalid_transition", "workflow_action", "itsm", "ticket", "close", tid)
    assigned = await c.ok("workflow_action", "itsm", "ticket", "assign", {**tid, "assignee_email": "ann@x.example"})
    assert (assigned["status"], assigned["assignee_email"]) == ("assigned", "ann@x.example")
    await c.ok("workflow_action", "itsm", "ticket", "start", tid)
    await c.refused(400, "invalid_arguments", "workflow_action", "itsm", "ticket", "escalate",
                    {**tid, "priority": "p4"})
    assert (await c.ok("workflow_action", "itsm", "ticket", "escalate", {**tid, "priority": "p2"}))["priority"] == "p2"
    await c.create("itsm", "ticket_comment", {"ticket_id": ticket["id"], "body": "Cleared the tray"})
    await c.ok("workflow_action", "itsm", "ticket", "resolve", {**tid, "resolution": "Cleared"})
    reopened = await c.ok("workflow_action", "itsm", "ticket", "reopen", {**tid, "reason": "Jammed again"})
    assert reopened["status"] == "in_progress" and reopened["resolved_at"] is None
    await c.ok("workflow_action", "itsm", "ticket", "resolve", {**tid, "resolution": "Roller replaced"})
    closed = await c.ok("workflow_action", "itsm", "ticket", "close", tid)
    assert closed["status"] == "closed" and closed["closed_at"]
    await c.refused(409, "invalid_transition", "workflow_action", "itsm", "ticket", "reopen", {**tid, "reason": "x"})
    await c.refused(409, "invalid_transition", "entity_crud", "itsm", "ticket_comment", "create",
                    {"ticket_id": ticket["id"], "body": "late"})
    comments = await c.ok("entity_crud", "itsm", "ticket_comment", "list", {"ticket_id": ticket["id"]})
    assert [x["body"] for x in comments["items"]] == ["Cleared the tray", "Reopened: Jammed again"]


async def test_auto_assign_balances_new_tickets_and_sla_report_lists_breaches(
        client: httpx.AsyncClient, factory: Factory) -> None:
    c = Caller(client, (await factory.workspace(roles=("owner",))))
    await c.create("itsm", "sla_policy", {"priority": "p2", "resolve_hours": 1})
    for i in range(3):
        await c.create("itsm", "ticket", {"title": f"Issue {i}", "priority": "p2"})
    result = await c.ok("smart_action", "itsm", "ticket", "autoAssign", {"agents": ["a@x.example", "b@x.example"]})
    assert [a["assignee_email"] for a in result["assigned"]] == ["a@x.example", "b@x.example", "a@x.example"]
    later = (datetime.now().astimezone() + timedelta(hours=2)).isoformat()
    report = await c.ok("report_query", "itsm", "ticket", "slaBreaches", {"as_of": later})
    assert len(report["breached"]) == 3 and report["due_within_24h"] == []
    now = await c.ok("report_query", "itsm", "ticket", "slaBreaches", {})
    assert now["breached"] == [] and len(now["due_within_24h"]) == 3
    # Blank agent names are a client error, not a crash (found by contract fuzzing).
    await c.refused(400, "invalid_arguments", "smart_action", "itsm", "ticket", "autoAssign", {"agents": ["", " "]})


async def test_another_organizations_tickets_are_not_found_and_numbering_is_per_organization(
        client: httpx.AsyncClient, factory: Factory) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs = Caller(client, (await factory.workspace(roles=("owner",))))
    ticket = await theirs.create("itsm", "ticket", {"title": "Theirs"})
    service = await theirs.create("itsm", "service", {"name": "ERP"})
    assert (await mine.create("itsm", "ticket", {"title": "Mine"}))["number"] == 1
    await mine.refused(404, "not_found", "workflow_action", "itsm", "ticket", "assign",
                       {"id": ticket["id"], "assignee_email": "me@x.example"})
    await mine.refused(404, "not_found", "entity_crud", "itsm", "ticket_comment", "create",
                       {"ticket_id": ticket["id"], "body": "hi"})
    await mine.refused(404, "not_found", "entity_crud", "itsm", "ticket", "create",
                       {"title": "x", "service_id": service["id"]})
    assigned = await mine.ok("smart_action", "itsm", "ticket", "autoAssign", {"agents": ["me@x.example"]})
    assert len(assigned["assigned"]) == 1
    assert (await theirs.read("itsm", "ticket", ticket["id"]))["status"] == "new"
