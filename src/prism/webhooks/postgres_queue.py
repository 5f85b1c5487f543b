"""The delivery queue's two hot statements on PostgreSQL, each one round trip outside a transaction block.

A worker's claims run one after another, so its throughput is at most (rows per claim) / (claim latency);
with a receiver that answers at once, that latency, not the database's or the worker's CPU, was the limit.
A claim used to take five round trips (BEGIN, SELECT … FOR UPDATE SKIP LOCKED, UPDATE, SELECT of the jobs,
COMMIT) and a results write four, each waiting for the worker's busy event loop to come back to it, with the
rows locked meanwhile. Here each is one statement on an autocommit connection: PostgreSQL runs it as its own
transaction, still committed synchronously (a recorded outcome is as durable as before).

SQLite keeps its own path in the worker: one writer at a time, no SKIP LOCKED, no UPDATE … RETURNING joins.

Claims and leases are timed by the database's clock (`now()`): workers on hosts whose clocks disagree would
otherwise each judge a lease by their own, and a host ahead by more than a lease would take a delivery another
worker is still sending.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Float,
    Integer,
    Interval,
    Row,
    String,
    Table,
    Text,
    bindparam,
    func,
    select,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from prism.models import OutboxEvent
from prism.models.base import UTCDateTime
from prism.webhooks.claim_order import fair_pick
from prism.webhooks.models import Webhook, WebhookDelivery

_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[assignment]
_WEBHOOKS: Table = Webhook.__table__  # type: ignore[assignment]
_EVENTS: Table = OutboxEvent.__table__  # type: ignore[assignment]


def _claim_statement() -> Any:
    """Lease up to `b_limit` due deliveries to `b_me`, organizations taking turns (claim_order), and return what
    sending them needs.

    The picking SELECT locks the rows it takes and skips rows another claim holds, so two workers never take
    the same delivery. It is a WITH query: PostgreSQL runs one holding FOR UPDATE exactly once, whatever plan
    the UPDATE gets. The joined webhook and event rows are read, not locked. Each lease lasts `b_lease` seconds,
    or its webhook's timeout plus `b_margin` when that is longer (worker.lease_seconds). Now is the database's
    clock (`now()`), the one clock every worker's host shares, unless `b_now` names another (a test's clock)."""
    d = _DELIVERIES.c
    now = func.coalesce(bindparam("b_now", type_=UTCDateTime()), func.now())
    seconds = func.greatest(bindparam("b_lease", type_=Float()),
                            _WEBHOOKS.c.timeout_seconds + bindparam("b_margin", type_=Float()))
    until = now + type_coerce(func.make_interval(0, 0, 0, 0, 0, 0, seconds), Interval())
    picked = (fair_pick(now, bindparam("b_limit", type_=Integer()))
              .with_for_update(skip_locked=True, of=_DELIVERIES).cte("picked"))
    return (update(_DELIVERIES)
            .where(d.id == picked.c.id, _WEBHOOKS.c.id == d.webhook_id, _EVENTS.c.id == d.event_id)
            .values(claimed_by=bindparam("b_me", type_=String()),
                    claimed_until=until)
            .returning(d.id, d.organization_id, d.webhook_id, d.event_type, d.status, d.attempt_count, d.is_test,
                       d.claimed_until, _EVENTS.c.payload,
                       _WEBHOOKS.c.url, _WEBHOOKS.c.sealed, _WEBHOOKS.c.is_active, _WEBHOOKS.c.events,
                       _WEBHOOKS.c.filters, _WEBHOOKS.c.max_retries, _WEBHOOKS.c.retry_delay_seconds,
                       _WEBHOOKS.c.timeout_seconds))


def _record_successes_statement() -> Any:
    """Mark a batch of deliveries SUCCESS (only those still under the claim that sent them: leased to `b_me`
    until the same moment) and end the consecutive-failure run of their webhooks.

    The webhook row is written only when its counter is not already zero: with one busy webhook, an
    unconditional write would make every worker's results queue behind one row lock."""
    d = _DELIVERIES.c
    outcome = select(
        func.unnest(bindparam("b_ids", type_=ARRAY(String()))).label("id"),
        func.unnest(bindparam("b_until", type_=ARRAY(DateTime(timezone=True)))).label("until"),
        func.unnest(bindparam("b_attempts", type_=ARRAY(Integer()))).label("attempts"),
        func.unnest(bindparam("b_codes", type_=ARRAY(Integer()))).label("code"),
        func.unnest(bindparam("b_bodies", type_=ARRAY(Text()))).label("body"),
        func.unnest(bindparam("b_at", type_=ARRAY(DateTime(timezone=True)))).label("at"),
    ).subquery("outcome")
    written = (update(_DELIVERIES)
               .where(d.id == outcome.c.id, d.claimed_by == bindparam("b_me", type_=String()),
                      d.claimed_until == outcome.c.until)
               .values(status="success", attempt_count=outcome.c.attempts, response_status_code=outcome.c.code,
                       response_body=outcome.c.body, error_message=None, claimed_by=None, claimed_until=None,
                       due_at=None, delivered_at=outcome.c.at)
               .returning(d.webhook_id, d.is_test)
               .cte("written"))
    recovered = select(written.c.webhook_id).where(written.c.is_test.is_(False))
    return (update(_WEBHOOKS)
            .where(_WEBHOOKS.c.id.in_(recovered), _WEBHOOKS.c.consecutive_failures != 0)
            .values(consecutive_failures=0))


_CLAIM = _claim_statement()
_RECORD_SUCCESSES = _record_successes_statement()


async def claim(connection: AsyncConnection, *, me: str, now: datetime | None, lease: float, margin: float,
                limit: int) -> Sequence[Row[Any]]:
    """`now`: None for the database's clock."""
    result = await connection.execute(_CLAIM, {"b_me": me, "b_now": now, "b_lease": lease, "b_margin": margin,
                                               "b_limit": limit})
    return result.all()


async def record_successes(connection: AsyncConnection, *, me: str, outcomes: list[dict[str, Any]]) -> None:
    """`outcomes`: one dict per delivery with id, leased_until (its claim's), attempt_count,
    response_status_code, response_body and delivered_at."""
    await connection.execute(_RECORD_SUCCESSES, {
        "b_me": me,
        "b_ids": [o["id"] for o in outcomes],
        "b_until": [o["leased_until"] for o in outcomes],
        "b_attempts": [o["attempt_count"] for o in outcomes],
        "b_codes": [o["response_status_code"] for o in outcomes],
        "b_bodies": [o["response_body"] for o in outcomes],
        "b_at": [o["delivered_at"] for o in outcomes],
    })
