"""agents: instances are spawned, run, record steps and retire into agent.completed or agent.failed."""

from __future__ import annotations

import httpx

from prism.storage import Database
from tests.domain_support import Caller, events
from tests.factories import Factory


async def test_retiring_a_running_instance_emits_agent_completed_with_its_outcome(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    agent = await c.create("agents", "agent", {"name": "AP clerk", "model": "small-1", "max_steps": 5})
    instance = await c.ok("agent_command", "agents", "agent_instance", "spawn",
                          {"agent_id": agent["id"], "task": "Match invoices to receipts"})
    assert instance["status"] == "spawned" and instance["spawned_by"] == ws.emails["owner"]
    await c.refused(409, "invalid_transition", "agent_command", "agents", "agent_instance", "retire",
                    {"id": instance["id"]})
    await c.refused(409, "invalid_transition", "agent_command", "agents", "agent_instance", "recordStep",
                    {"id": instance["id"], "kind": "thought", "content": "too early"})
    await c.ok("agent_command", "agents", "agent_instance", "run", {"id": instance["id"]})
    step = await c.ok("agent_command", "agents", "agent_instance", "recordStep",
                      {"id": instance["id"], "kind": "tool_call", "content": "entity_crud/finance/invoice/list"})
    assert step["seq"] == 1
    done = await c.ok("agent_command", "agents", "agent_instance", "retire",
                      {"id": instance["id"], "result": "12 invoices matched"})
    assert (done["status"], done["result"], done["step_count"]) == ("completed", "12 invoices matched", 1)
    [event] = await events(db, ws.org.id, "agent.completed")
    data = event["data"]
    assert {k: data[k] for k in ("instance_id", "agent_id", "agent_name", "status", "result", "step_count")} == {
        "instance_id": instance["id"], "agent_id": agent["id"], "agent_name": "AP clerk", "status": "completed",
        "result": "12 invoices matched", "step_count": 1}
    assert data["started_at"] and data["ended_at"] == done["ended_at"] and data["duration_ms"] >= 0
    assert await events(db, ws.org.id, "agent.failed") == []
    await c.refused(409, "invalid_transition", "agent_command", "agents", "agent_instance", "fail",
                    {"id": instance["id"], "error": "late"})


async def test_an_instance_that_errors_or_exceeds_its_step_limit_emits_agent_failed(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await factory.workspace(roles=("owner",))
    c = Caller(client, ws)
    agent = await c.create("agents", "agent", {"name": "Triage bot", "max_steps": 1})
    first = await c.ok("agent_command", "agents", "agent_instance", "spawn", {"agent_id": agent["id"], "task": "A"})
    await c.ok("agent_command", "agents", "agent_instance", "run", {"id": first["id"]})
    failed = await c.ok("agent_command", "agents", "agent_instance", "retire",
                        {"id": first["id"], "error": "tool timed out"})
    assert (failed["status"], failed["error"]) == ("failed", "tool timed out")
    second = await c.ok("agent_command", "agents", "agent_instance", "spawn", {"agent_id": agent["id"], "task": "B"})
    await c.ok("agent_command", "agents", "agent_instance", "run", {"id": second["id"]})
    await c.ok("agent_command", "agents", "agent_instance", "recordStep",
               {"id": second["id"], "kind": "thought", "content": "one"})
    over = await c.ok("agent_command", "agents", "agent_instance", "recordStep",
                      {"id": second["id"], "kind": "thought", "content": "two"})
    assert over["status"] == "failed" and "step limit" in over["error"]
    failures = await events(db, ws.org.id, "agent.failed")
    assert [(e["data"]["instance_id"], e["data"]["error"]) for e in failures] == [
        (first["id"], "tool timed out"), (second["id"], "step limit of 1 reached")]
    report = await c.ok("report_query", "agents", "agent", "performance", {})
    assert report["agents"][0]["failed"] == 2 and report["agents"][0]["success_rate"] == 0.0
    await c.ok("workflow_action", "agents", "agent", "disable", {"id": agent["id"]})
    await c.refused(409, "invalid_transition", "agent_command", "agents", "agent_instance", "spawn",
                    {"agent_id": agent["id"], "task": "C"})
    await c.refused(409, "conflict", "entity_crud", "agents", "agent", "delete", {"id": agent["id"]})


async def test_another_organizations_agents_and_instances_are_not_found(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    mine = Caller(client, (await factory.workspace(roles=("owner",))))
    theirs_ws = await factory.workspace(roles=("owner",))
    theirs = Caller(client, theirs_ws)
    agent = await theirs.create("agents", "agent", {"name": "Theirs"})
    instance = await theirs.ok("agent_command", "agents", "agent_instance", "spawn",
                               {"agent_id": agent["id"], "task": "secret task"})
    await mine.refused(404, "not_found", "agent_command", "agents", "agent_instance", "spawn",
                       {"agent_id": agent["id"], "task": "hijack"})
    for operation in ("run", "cancel"):
        await mine.refused(404, "not_found", "agent_command", "agents", "agent_instance", operation,
                           {"id": instance["id"]})
    await mine.refused(404, "not_found", "agent_command", "agents", "agent_instance", "retire", {"id": instance["id"]})
    assert (await mine.ok("entity_crud", "agents", "agent_instance", "list", {"search": "secret"}))["total"] == 0
    assert (await theirs.read("agents", "agent_instance", instance["id"]))["status"] == "spawned"
    assert await events(db, theirs_ws.org.id, "agent.completed") == []
