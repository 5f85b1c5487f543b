"""Parameter models of the agents app."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from prism.apps.params import ListParams, Params

InstanceStatus = Literal["spawned", "running", "completed", "failed", "cancelled"]
StepKind = Literal["thought", "tool_call", "observation", "message"]


class AgentList(ListParams):
    status: Literal["active", "disabled"] | None = Field(None, description="Only agents in this state.")
    model: str | None = Field(None, max_length=128, description="Only agents running this model.")


class AgentCreate(Params):
    name: str = Field(..., min_length=1, max_length=255, description="Agent name, unique per organization.")
    description: str = Field("", max_length=5000, description="What the agent is for.")
    model: str = Field("", max_length=128, description="Model the agent runs on.")
    instructions: str = Field("", max_length=50_000, description="System instructions given to the agent.")
    max_steps: int = Field(50, ge=1, le=10_000, description="Steps an instance may record before it must end.")


class AgentUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Agent id.")
    description: str | None = Field(None, max_length=5000, description="What the agent is for.")
    model: str | None = Field(None, max_length=128, description="Model the agent runs on.")
    instructions: str | None = Field(None, max_length=50_000, description="System instructions.")
    max_steps: int | None = Field(None, ge=1, le=10_000, description="Step limit of new and running instances.")


class InstanceList(ListParams):
    agent_id: str | None = Field(None, max_length=64, description="Only instances of this agent.")
    status: InstanceStatus | None = Field(None, description="Only instances in this state.")


class StepList(ListParams):
    instance_id: str | None = Field(None, max_length=64, description="Only steps of this instance.")
    kind: StepKind | None = Field(None, description="Only steps of this kind.")


class AgentAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Agent id.")


class Spawn(Params):
    agent_id: str = Field(..., min_length=1, max_length=64, description="Agent to run.")
    task: str = Field(..., min_length=1, max_length=20_000, description="The task given to the instance.")


class InstanceAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Agent instance id.")


class RecordStep(InstanceAction):
    kind: StepKind = Field(..., description="What kind of step this is.")
    content: str = Field(..., min_length=1, max_length=50_000, description="The step's content.")


class Retire(InstanceAction):
    result: str = Field("", max_length=50_000, description="The instance's outcome on success.")
    error: str | None = Field(None, min_length=1, max_length=10_000,
                              description="Set when the instance ended with an error: it then fails.")


class Fail(InstanceAction):
    error: str = Field(..., min_length=1, max_length=10_000, description="What went wrong.")


class AgentReportParams(Params):
    agent_id: str | None = Field(None, max_length=64, description="Only this agent.")
