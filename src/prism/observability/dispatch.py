"""What the dispatcher reports about each call: the request it belongs to (its id goes into the call's ledger
entry), its latency, and the decision governance took on it."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from prism.errors import Blocked, BudgetExceeded, OversightRequired
from prism.observability import metrics
from prism.observability.current import CURRENT_REQUEST

if TYPE_CHECKING:  # the dispatcher imports this module
    from prism.dispatch.dispatcher import Call

MAX_COORDINATE = 255


class ObservedDispatch:
    """`with ObservedDispatch(call, governed=...):` around one dispatch."""

    __slots__ = ("call", "governed", "started")

    def __init__(self, call: Call, *, governed: bool) -> None:
        self.call = call
        self.governed = governed
        self.started = time.perf_counter()
        request = CURRENT_REQUEST.get()
        if request is not None:
            call.request_id = request.request_id
            request.door, request.tool = call.door, metrics.tool_label(call.tool_name)
            request.coordinate = call.coordinate_label()[:MAX_COORDINATE]

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        metrics.dispatch_timed(self.call.door, "allowed" if error is None else "refused").observe(
            time.perf_counter() - self.started)
        if self.governed:
            _count_decision(error)


def _count_decision(error: BaseException | None) -> None:
    if error is None:
        metrics.decision_counted("allow").inc()
    elif isinstance(error, Blocked):
        metrics.decision_counted("deny").inc()
    elif isinstance(error, OversightRequired):
        metrics.decision_counted("oversight").inc()
        metrics.OVERSIGHT_REQUESTS.inc()
    elif isinstance(error, BudgetExceeded):
        metrics.decision_counted("budget_exceeded").inc()
        metrics.BUDGET_REFUSALS.inc()
