"""The one paging of every list Prism answers: `page` and `page_size` in, `{items, page, page_size, total}` out.

Handlers' `list` operations, introspection's handlers dimension, the tool catalog, the webhook event registry
and the webhook REST lists all take `Paging`'s two fields and answer `envelope(...)` (docs/extending.md "Lists").
A door whose contract names other keys for the same list (SPEC's `{tools, count}` of the catalog, `{count,
results}` of the webhook lists) answers those keys beside the envelope's, never instead of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import Field

from prism.registry.params import Params

PAGE_MAX = 1_000_000
PAGE_SIZE_DEFAULT = 20
PAGE_SIZE_MAX = 100

T = TypeVar("T")


class Paging(Params):
    """The paging parameters; a list's parameter model extends it (`class InvoiceList(Paging): ...`)."""

    page: int = Field(1, ge=1, le=PAGE_MAX, description="1-based page number.")
    page_size: int = Field(PAGE_SIZE_DEFAULT, ge=1, le=PAGE_SIZE_MAX,
                           description=f"Items per page (default {PAGE_SIZE_DEFAULT}, at most {PAGE_SIZE_MAX}).")

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.page_size


def envelope(items: list[Any], page: int, page_size: int, total: int) -> dict[str, Any]:
    """One page of a list: its items, where it is, and how many there are in all."""
    return {"items": items, "page": page, "page_size": page_size, "total": total}


def page_of(items: Sequence[T], paging: Paging) -> dict[str, Any]:
    """A page of a list held in memory (the registry's, the event types)."""
    return envelope(list(items[paging.offset:paging.offset + paging.page_size]), paging.page, paging.page_size,
                    len(items))
