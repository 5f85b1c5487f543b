"""Parameter models shared by the built-in apps."""

from __future__ import annotations

from pydantic import Field

from prism.registry.params import Params

__all__ = ["DeleteParams", "ListParams", "NoParams", "Params", "ReadParams"]


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
