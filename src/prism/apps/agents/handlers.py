"""agents: agent definitions and their instances (spawn → run → retire), with the steps they record.

Instance states: spawned → running → completed | failed; spawned/running → cancelled. Retiring a running
instance completes it (agent.completed) or, with an error, fails it (agent.failed); so does `fail`, and
reaching the agent's step limit fails the instance on the step that exceeds it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, select

from prism.apps import shipped_examples
from prism.apps.agents.models import Agent, AgentInstance, AgentStep
from prism.apps.agents.params import (
    AgentAction,
    AgentCreate,
    AgentList,
    AgentReportParams,
    AgentUpdate,
    Fail,
    InstanceAction,
    InstanceList,
    RecordStep,
    Retire,
    Spawn,
    StepList,
)
from prism.apps.crud import Entity, crud, repo
from prism.apps.states import move
from prism.errors import Conflict
from prism.events.outbox import emit_for
from prism.kit.timeutil import iso, utcnow
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

app = HandlerApp("agents", description="AI agents: definitions, running instances, their steps and outcomes.",
                 examples=shipped_examples())

INSTANCE_TRANSITIONS: dict[str, frozenset[str]] = {
    "spawned": frozenset({"running", "cancelled"}),
    "running": frozenset({"completed", "failed", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
AGENT_TRANSITIONS: dict[str, frozenset[str]] = {"active": frozenset({"disabled"}),
                                                "disabled": frozenset({"active"})}



async def _instance(call: HandlerCall, instance_id: str) -> AgentInstance:
    row: AgentInstance = await repo(call, AgentInstance, "agent_instance").get(instance_id)
    return row


async def _before_agent_delete(call: HandlerCall, agent: Agent) -> None:
    runs = (await call.session.execute(select(func.count()).select_from(AgentInstance).where(
        AgentInstance.agent_id == agent.id))).scalar_one()
    if runs:
        raise Conflict(f"agent {agent.name} has {runs} instances; disable it instead")


async def _before_instance_delete(call: HandlerCall, instance: AgentInstance) -> None:
    if instance.status in ("spawned", "running"):
        raise Conflict(f"instance is {instance.status}; retire or cancel it first", code="invalid_transition")


crud(app, Entity(Agent, "agent", "agents", AgentList, search=("name", "description", "model"),
                 orderable=("name", "created_at", "updated_at"), default_ordering="name", create=AgentCreate,
                 update=AgentUpdate, group_by=("status", "model"), before_delete=_before_agent_delete,
                 keywords=("ai agent", "assistant definition", "bot", "assistant", "ai worker", "automation")))
crud(app, Entity(AgentInstance, "agent_instance", "agent instances", InstanceList, search=("task", "result", "error"),
                 orderable=("created_at", "started_at", "ended_at", "step_count"), default_ordering="-created_at",
                 group_by=("status", "agent_id"), sums=("step_count",), before_delete=_before_instance_delete,
                 keywords=("agent run", "execution", "job", "agent session", "task run")))
crud(app, Entity(AgentStep, "agent_step", "agent steps", StepList, search=("content",),
                 orderable=("seq", "created_at"), default_ordering="seq", deletable=False,
                 group_by=("kind", "instance_id"), keywords=("trace", "transcript", "tool call log", "reasoning step")))


async def _end(call: HandlerCall, instance: AgentInstance, target: str, *, result: str = "",
               error: str = "") -> dict[str, Any]:
    move(instance, target, INSTANCE_TRANSITIONS, "agent instance")
    instance.result, instance.error, instance.ended_at = result, error, utcnow()
    await call.session.flush()
    agent: Agent = await repo(call, Agent, "agent").get(instance.agent_id)
    started = instance.started_at or instance.created_at
    data = {"instance_id": instance.id, "agent_id": agent.id, "agent_name": agent.name, "status": instance.status,
            "task": instance.task[:1000], "step_count": instance.step_count, "started_at": iso(instance.started_at),
            "ended_at": iso(instance.ended_at),
            "duration_ms": int((instance.ended_at - started).total_seconds() * 1000) if instance.ended_at else None}
    if target == "completed":
        await emit_for(call, "agent.completed", {**data, "result": result[:1000]})
    elif target == "failed":
        await emit_for(call, "agent.failed", {**data, "error": error[:1000]})
    return to_record(instance)


@app.handler("agent_command", "agent_instance", "spawn", params=Spawn, scope="execute",
             permission="agents.add_agent_instance",
             description="Spawn an instance of an active agent for a task (state spawned).",
             keywords=("start agent", "launch agent", "delegate task"))
async def spawn_instance(call: HandlerCall, p: Spawn) -> dict[str, Any]:
    agent: Agent = await repo(call, Agent, "agent").get(p.agent_id)
    if agent.status != "active":
        raise Conflict(f"agent {agent.name} is {agent.status}", code="invalid_transition")
    instance = repo(call, AgentInstance, "agent_instance").add(agent_id=agent.id, task=p.task,
                                                                spawned_by=call.auth.user_email)
    await call.session.flush()
    return to_record(instance)


@app.handler("agent_command", "agent_instance", "run", params=InstanceAction, scope="execute",
             description="Mark a spawned instance as running.", keywords=("execute agent", "begin run"))
async def run_instance(call: HandlerCall, p: InstanceAction) -> dict[str, Any]:
    instance = await _instance(call, p.id)
    move(instance, "running", INSTANCE_TRANSITIONS, "agent instance")
    instance.started_at = utcnow()
    await call.session.flush()
    return to_record(instance)


@app.handler("agent_command", "agent_instance", "recordStep", params=RecordStep, scope="execute",
             description="Append a step (thought, tool call, observation, message) to a running instance; the "
                         "step past the agent's limit fails the instance.", keywords=("log step", "trace"))
async def record_step(call: HandlerCall, p: RecordStep) -> dict[str, Any]:
    instance = await _instance(call, p.id)
    if instance.status != "running":
        raise Conflict(f"agent instance is {instance.status}, not running", code="invalid_transition")
    agent: Agent = await repo(call, Agent, "agent").get(instance.agent_id)
    if instance.step_count >= agent.max_steps:
        return await _end(call, instance, "failed", error=f"step limit of {agent.max_steps} reached")
    instance.step_count += 1
    step = repo(call, AgentStep, "agent_step").add(instance_id=instance.id, seq=instance.step_count, kind=p.kind,
                                                    content=p.content)
    await call.session.flush()
    return to_record(step)


@app.handler("agent_command", "agent_instance", "retire", params=Retire, scope="execute", destructive=True,
             description="End a running instance: completed with its result (emits agent.completed), or failed "
                         "when an error is given (emits agent.failed).", keywords=("finish agent", "stop agent"))
async def retire_instance(call: HandlerCall, p: Retire) -> dict[str, Any]:
    instance = await _instance(call, p.id)
    if p.error:
        return await _end(call, instance, "failed", result=p.result, error=p.error)
    return await _end(call, instance, "completed", result=p.result)


@app.handler("agent_command", "agent_instance", "fail", params=Fail, scope="execute",
             description="Record that a running instance crashed or gave up (emits agent.failed).",
             keywords=("agent error", "abort run"))
async def fail_instance(call: HandlerCall, p: Fail) -> dict[str, Any]:
    return await _end(call, await _instance(call, p.id), "failed", error=p.error)


@app.handler("agent_command", "agent_instance", "cancel", params=InstanceAction, scope="execute",
             destructive=True,
             description="Cancel a spawned or running instance (no outcome event).", keywords=("kill agent",))
async def cancel_instance(call: HandlerCall, p: InstanceAction) -> dict[str, Any]:
    return await _end(call, await _instance(call, p.id), "cancelled")


@app.handler("workflow_action", "agent", "disable", params=AgentAction, scope="execute", destructive=True,
             description="Disable an agent: no new instances can be spawned.", keywords=("turn off agent",))
async def disable_agent(call: HandlerCall, p: AgentAction) -> dict[str, Any]:
    agent: Agent = await repo(call, Agent, "agent").get(p.id)
    move(agent, "disabled", AGENT_TRANSITIONS, "agent")
    await call.session.flush()
    return to_record(agent)


@app.handler("workflow_action", "agent", "enable", params=AgentAction, scope="execute",
             description="Enable a disabled agent again.", keywords=("turn on agent", "activate"))
async def enable_agent(call: HandlerCall, p: AgentAction) -> dict[str, Any]:
    agent: Agent = await repo(call, Agent, "agent").get(p.id)
    move(agent, "active", AGENT_TRANSITIONS, "agent")
    await call.session.flush()
    return to_record(agent)


@app.handler("report_query", "agent", "performance", params=AgentReportParams, scope="read",
             permission="agents.view_agent",
             description="Per agent: instances by outcome, success rate of finished runs and average steps.",
             keywords=("success rate", "agent metrics", "failures", "effectiveness", "kpi", "scorecard"))
async def agent_performance(call: HandlerCall, p: AgentReportParams) -> dict[str, Any]:
    def count(state: str) -> Any:
        return func.sum(case((AgentInstance.status == state, 1), else_=0))

    stmt = (select(Agent.id, Agent.name, func.count(AgentInstance.id), count("completed"), count("failed"),
                   count("cancelled"), func.avg(AgentInstance.step_count))
            .join(AgentInstance, AgentInstance.agent_id == Agent.id)
            .group_by(Agent.id, Agent.name).order_by(Agent.name))
    if p.agent_id:
        stmt = stmt.where(Agent.id == p.agent_id)
    agents = []
    for agent_id, name, total, completed, failed, cancelled, steps in (await call.session.execute(stmt)).all():
        finished = int(completed) + int(failed)
        agents.append({"agent_id": agent_id, "name": name, "instances": total, "completed": int(completed),
                       "failed": int(failed), "cancelled": int(cancelled),
                       "success_rate": round(int(completed) / finished, 4) if finished else None,
                       "average_steps": round(float(steps), 2) if steps is not None else None})
    return {"agents": agents}
