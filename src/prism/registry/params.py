"""The base class for handler parameter models: declare yours as `class QuoteParams(Params): ...`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Params(BaseModel):
    """Unknown arguments are refused: an agent's typo should fail loudly, not be ignored."""

    # defer_build: a model's validator is built on its first call, not when its class is declared. With
    # thousands of handlers most are never called by a given process, and start-up pays only for their
    # schemas (prism.registry.fast_schema writes those from the declared fields, without a validator).
    model_config = ConfigDict(extra="forbid", defer_build=True)
