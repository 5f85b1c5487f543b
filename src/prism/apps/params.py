"""Parameter models shared by the built-in apps."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Params(BaseModel):
    """Unknown arguments are refused: an agent's typo should fail loudly, not be ignored."""

    # defer_build: a model's validator is built on its first call, not at import. With thousands of
    # handlers most are never called by a given process, and start-up pays only for their schemas
    # (prism.registry.fast_schema writes those without building the validator).
    model_config = ConfigDict(extra="forbid", defer_build=True)


class NoParams(Params):
    pass


class ListParams(Params):
    page: int = Field(1, ge=1, le=1_000_000, description="1-based page number.")
    page_size: int = Field(20, ge=1, le=100, description="Items per page (max 100).")
    ordering: str | None = Field(None, max_length=64,
                                 description="Field to order by; prefix '-' for descending.")
    search: str | None = Field(None, max_length=200, description="Case-insensitive text search.")


class ReadParams(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Record id.")


class DeleteParams(ReadParams):
    pass
