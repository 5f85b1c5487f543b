"""Parameter models shared by the built-in apps."""

from __future__ import annotations

from pydantic import Field

from prism.kit.paging import Paging
from prism.registry.params import Params

__all__ = ["DeleteParams", "ListParams", "NoParams", "OrderedListParams", "Params", "ReadParams"]


class NoParams(Params):
    pass


class OrderedListParams(Paging):
    """A list's paging and ordering: an entity with no text to search (`Entity.search` empty) lists with these."""

    ordering: str | None = Field(None, max_length=64,
                                 description="Field to order by; prefix '-' for descending.")


class ListParams(OrderedListParams):
    search: str | None = Field(None, max_length=200, description="Case-insensitive text search.")


class ReadParams(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Record id.")


class DeleteParams(ReadParams):
    pass
