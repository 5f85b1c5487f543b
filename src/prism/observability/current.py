"""The request being served, for code the edge does not call directly (the dispatcher, its ledger entry).

The edge sets it around each HTTP request; outside one (the CLI, a worker process) it is None.
"""

from __future__ import annotations

from contextvars import ContextVar

from prism.edge.context import RequestContext

CURRENT_REQUEST: ContextVar[RequestContext | None] = ContextVar("prism_current_request", default=None)


def current_request() -> RequestContext | None:
    return CURRENT_REQUEST.get()
