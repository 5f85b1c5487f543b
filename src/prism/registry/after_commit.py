"""A handler's answer whose slow part waits until its call is committed: outbound requests.

A handler runs inside the ledger transaction, and SQLite has one writer: a handler that waited there for
an external system (up to its 30 s timeout) would hold every other call of the process behind it
(PostgreSQL: one of the ledger's few lanes). So a handler that calls out returns `AfterCommit` instead of
its data. The dispatcher first commits what the handler did in the transaction — its checks, the
persona, oversight and budget decisions and the audit entry, all before anything leaves Prism — then
awaits `send()` outside any transaction, then runs `record(call, outcome)` in a transaction of its own (a
call log, say); what `record` returns is the caller's data, or, when it returns a `PrismError`, the refusal
the caller gets once what `record` wrote is committed (an upstream's failure, recorded). If the process dies
in between, the audit entry says the call was allowed; whatever `record` would have written is missing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from prism.registry.model import HandlerCall

Outcome = TypeVar("Outcome")


@dataclass(frozen=True, slots=True)
class AfterCommit(Generic[Outcome]):
    send: Callable[[], Awaitable[Outcome]]
    record: Callable[[HandlerCall, Outcome], Awaitable[Any]]
