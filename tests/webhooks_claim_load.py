"""Many organizations with a webhook each, written straight into PostgreSQL (generate_series): what a claim reads
as organizations grow (tests/test_webhooks_claim_scale.py, bench/webhook_claims.py).

Each organization gets one webhook, one event, `history` final deliveries (SUCCESS, `due_at` null: most of a real
queue table's rows) and, where asked, deliveries due now (oldest first by a second each), leased to a worker, or due
later (a retry scheduled an hour ahead). Organizations are numbered 1..count; their ids are `<prefix>-<number>`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection

from prism.webhooks import postgres_queue

# Each statement names its parameters once, typed (asyncpg infers no type for a parameter `||` joins).
_ORGANIZATIONS = """
WITH given AS (SELECT CAST(:p AS text) AS p, CAST(:tenant AS text) AS tenant, CAST(:count AS integer) AS count)
INSERT INTO organizations (id, tenant_id, slug, name, created_at)
SELECT p || '-' || n, tenant, 'o' || n, 'claims ' || n, now() FROM given, generate_series(1, count) n"""
_WEBHOOKS = """
WITH given AS (SELECT CAST(:p AS text) AS p, CAST(:tenant AS text) AS tenant, CAST(:count AS integer) AS count)
INSERT INTO webhooks (id, organization_id, tenant_id, name, description, url, events, filters, header_names, sealed,
                      max_retries, retry_delay_seconds, timeout_seconds, is_active, consecutive_failures, created_at,
                      updated_at)
SELECT p || '-w' || n, p || '-' || n, tenant, 'hook', '', 'https://receiver.example/' || n, '[]', '{}', '[]', 'x',
       3, 60, 10, true, 0, now(), now() FROM given, generate_series(1, count) n"""
_EVENTS = """
WITH given AS (SELECT CAST(:p AS text) AS p, CAST(:tenant AS text) AS tenant, CAST(:count AS integer) AS count)
INSERT INTO event_outbox (id, organization_id, tenant_id, event_type, payload, created_at)
SELECT p || '-e' || n, p || '-' || n, tenant, 'governance.decision.allow', '{}', now()
FROM given, generate_series(1, count) n"""
# One statement per kind of delivery: organizations `first`..`last`, `each` deliveries of each.
_DELIVERIES = """
WITH given AS (SELECT CAST(:p AS text) AS p, CAST(:kind AS text) AS kind, CAST(:status AS text) AS status,
                      CAST(:first AS integer) AS first, CAST(:last AS integer) AS last, CAST(:each AS integer) AS each)
INSERT INTO webhook_deliveries (id, organization_id, webhook_id, event_id, event_type, status, attempt_count,
                                response_body, is_test, due_at, claimed_until, claimed_by, delivered_at, created_at)
SELECT p || '-' || kind || '-' || o || '-' || k, p || '-' || o, p || '-w' || o, p || '-e' || o,
       'governance.decision.allow', status, 0, '', false,
       CASE kind WHEN 'history' THEN NULL
                 WHEN 'later' THEN now() + interval '1 hour'
                 ELSE now() - interval '1 hour' + k * interval '1 second' END,
       CASE kind WHEN 'leased' THEN now() + interval '10 minutes' END,
       CASE kind WHEN 'leased' THEN 'another-worker' END,
       CASE kind WHEN 'history' THEN now() END,
       now() - interval '2 hours'
FROM given, generate_series(first, last) o, generate_series(1, each) k"""


def delivery_id(prefix: str, kind: str, organization: int, number: int) -> str:
    return f"{prefix}-{kind}-{organization}-{number}"


async def seed(connection: AsyncConnection, *, count: int, history: int, due: Mapping[int, int] | None = None,
               leased: Mapping[int, int] | None = None, later: Mapping[int, int] | None = None) -> str:
    """Write `count` organizations (one tenant) as the module says; `due`, `leased`, `later`: organization number ->
    how many deliveries of that kind. Answers the ids' prefix."""
    prefix = uuid.uuid4().hex[:8]
    tenant = str(uuid.uuid4())
    base: dict[str, Any] = {"p": prefix, "tenant": tenant, "count": count}
    await connection.execute(text("INSERT INTO tenants (id, subdomain, name, created_at) "
                                  "VALUES (:t, :s, 'claims', now())"), {"t": tenant, "s": f"claims-{prefix}"})
    for statement in (_ORGANIZATIONS, _WEBHOOKS, _EVENTS):
        await connection.execute(text(statement), base)

    async def deliveries(kind: str, status: str, first: int, last: int, each: int) -> None:
        await connection.execute(text(_DELIVERIES), {"p": prefix, "kind": kind, "status": status, "first": first,
                                                     "last": last, "each": each})

    if history:
        await deliveries("history", "success", 1, count, history)
    for kind, status, numbers in (("due", "pending", due), ("leased", "pending", leased),
                                  ("later", "retrying", later)):
        for organization, each in (numbers or {}).items():
            await deliveries(kind, status, organization, organization, each)
    return prefix


async def explain_claim(connection: AsyncConnection, *, limit: int) -> dict[str, Any]:
    """The plan of one claim (postgres_queue.claim, the database's clock) as it runs now: EXPLAIN (ANALYZE, BUFFERS,
    FORMAT JSON) of the statement and parameters the claim sends. Claims twice (once to see what it sends, once
    explained), each in a savepoint rolled back: run it in a transaction."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    sync = connection.sync_connection
    assert sync is not None
    event.listen(sync, "before_cursor_execute", record)
    try:
        async with connection.begin_nested() as seen:
            await postgres_queue.claim(connection, me="explained", now=None, lease=30, margin=5, limit=limit)
            await seen.rollback()
    finally:
        event.remove(sync, "before_cursor_execute", record)
    [statement, parameters] = next(s for s in sent if "SKIP LOCKED" in s[0])
    async with connection.begin_nested() as explained:
        plan = (await connection.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement,
                                                 parameters)).scalar_one()
        await explained.rollback()
    document = json.loads(plan) if isinstance(plan, str) else plan
    return dict(document[0])


def organizations_probed(plan: dict[str, Any]) -> int:
    """How many organizations the claim read its oldest due deliveries of: the loops of that index scan
    (claim_order.fair_pick's `due`, whichever way the plan reads it)."""
    node = plan.get("Plan", plan)
    here = node.get("Actual Loops", 0) if node.get("Alias") == "due" else 0
    return int(here + sum(organizations_probed(child) for child in node.get("Plans", [])))


def buffers(plan: dict[str, Any]) -> int:
    """Shared buffers the whole claim touched (hit or read)."""
    node = plan["Plan"]
    return int(node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0))
