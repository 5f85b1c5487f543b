"""Prism's Prometheus series (docs/operations.md "Metrics"), defined once per process.

Under `prism serve --workers N` the supervisor points PROMETHEUS_MULTIPROC_DIR at a private directory before
the workers start, so prometheus-client keeps each worker's values in a file there and a scrape of any worker
adds them all up (prism.observability.scrape). Labels are few and bounded: a door, a status class, a
mega-tool name, an outcome; never an id or anything a client chose.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from prism.registry.mega_tools import LEGACY_BINDINGS, MEGA_TOOLS, tool_name

Child = TypeVar("Child")


def kept(labels: Callable[..., Child]) -> Callable[..., Child]:
    """A metric's `labels` remembered per label values. `labels()` checks its arguments and takes the metric's lock
    on every call, which is most of what counting a request costs; the children it returns are the metric's own and
    stay valid (prometheus-client's documentation suggests keeping them). Label values are bounded (see above), so
    is this cache."""
    return functools.cache(labels)


REQUESTS = Counter("prism_http_requests", "HTTP requests answered, by door, status class and mega-tool.",
                   ["door", "status_class", "tool"])
DISPATCH_SECONDS = Histogram("prism_dispatch_duration_seconds",
                             "Time from the dispatcher taking a call to its answer (ledger commit included).",
                             ["door", "outcome"],
                             buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
GOVERNANCE_DECISIONS = Counter("prism_governance_decisions",
                               "Governed calls (persona, AI system or mission) by decision.", ["decision"])
OVERSIGHT_REQUESTS = Counter("prism_oversight_requests", "Calls held for human oversight (202).")
BUDGET_REFUSALS = Counter("prism_budget_refusals", "Calls refused because their mission's budget is spent.")
LEDGER_BATCH_SIZE = Histogram("prism_ledger_batch_size", "Calls committed together in one ledger transaction.",
                              buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256))
LEDGER_COMMIT_SECONDS = Histogram("prism_ledger_commit_duration_seconds",
                                  "Time to run and commit one ledger batch.",
                                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
LEDGER_ENTRIES_SEALED = Counter("prism_ledger_entries_sealed",
                                "Ledger entries given their position: by the call's own transaction ('with_call') or "
                                "after its commit, because another transaction held the head ('after_commit').",
                                ["when"])
WEBHOOK_DELIVERIES = Counter("prism_webhook_deliveries", "Webhook delivery attempts by outcome.", ["outcome"])
RATE_LIMIT_REFUSALS = Counter("prism_rate_limit_refusals", "Requests refused by a rate limit (429).", ["door"])
LOCKOUT_REFUSALS = Counter("prism_lockout_refusals",
                           "Requests refused because their address is locked out after failed authentications.")
AUTHENTICATION_FAILURES = Counter("prism_authentication_failures",
                                  "Requests whose credential (key, token, password, client secret) was refused.",
                                  ["door"])
# Each process counts its own checked-out connections; live processes are added up.
DB_POOL_IN_USE = Gauge("prism_db_pool_connections_in_use", "Database connections checked out of the pools.",
                       multiprocess_mode="livesum")

# Wire name -> the mega-tool label: the 13 mega-tools and the utility tools bound to one; anything else a client
# sends is "unknown", so the label's values stay bounded.
_TOOL_LABEL = {tool_name(m): m for m in MEGA_TOOLS} | {
    name: path.split("/", 1)[0] for name, path in LEGACY_BINDINGS.items()}


def tool_label(wire_name: str) -> str:
    return _TOOL_LABEL.get(wire_name, "unknown")


# The labelled series counted on every request or call, through their kept children.
requests_counted: Callable[[str, str, str], Any] = kept(REQUESTS.labels)
dispatch_timed: Callable[[str, str], Any] = kept(DISPATCH_SECONDS.labels)
decision_counted: Callable[[str], Any] = kept(GOVERNANCE_DECISIONS.labels)
