"""What /readyz checks: the database answers, its schema is at the newest migration, Redis answers (when
configured), and the webhook queue moves (that one only ever degraded).

Redis down is "degraded", not "unavailable", when PRISM_RATE_LIMIT_ON_REDIS_FAILURE=open: the operator chose to
serve uncounted through the outage, and every node shares the one Redis, so a 503 would have an orchestrator take
every node out of service, the outage that failing open is there to avoid.

A webhook backlog is "degraded", never "unavailable": the queue is the deployment's, not this node's (one slow
receiver, drained steadily, makes its oldest delivery late on every node alike), and a node with a backlog still
serves every request. Whether the node can serve is what the database and migrations checks say.

Each check has a short time limit of its own, so a probe answers within seconds even when a dependency hangs,
and reports "ok", "degraded" or "unavailable" with a short detail: the probe needs no authentication, so it names no
host, URL or error text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text

from prism.kit.timeutil import utcnow
from prism.migrate import newest_revision
from prism.ratelimit import RateLimiter
from prism.storage import Database
from prism.webhooks.models import WebhookDelivery

CHECK_TIMEOUT_SECONDS = 2.0
_WAITING = ("pending", "retrying")


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool  # degraded counts as ok: the node still serves
    detail: str | None = None
    degraded: bool = False

    @property
    def status(self) -> str:
        return "unavailable" if not self.ok else "degraded" if self.degraded else "ok"

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status}
        if self.detail:
            body["detail"] = self.detail
        return body


class Readiness:
    def __init__(self, db: Database, limiter: RateLimiter | None, *, stall_seconds: float) -> None:
        self.db = db
        self.limiter = limiter  # None: no Redis configured, nothing to check
        self.stall_seconds = stall_seconds
        # The schema never goes back to an older revision under a running process: once at head, not asked again.
        self.schema_at_head = False

    async def check(self) -> dict[str, Check]:
        names = ["database", "webhooks"]
        probes = [self._database(), self._webhooks()]
        if self.limiter is not None:
            names.append("redis")
            probes.append(self._redis(self.limiter))
        results = await asyncio.gather(*(_bounded(probe) for probe in probes))
        checks = dict(zip(names, results, strict=True))
        redis = checks.get("redis")
        if redis is not None and not redis.ok and self.limiter is not None and not self.limiter.fails_closed:
            checks["redis"] = Check(True, f"{redis.detail}; limits not counted (on failure: open)", degraded=True)
        webhooks = checks["webhooks"]
        if not webhooks.ok:  # its query failing alone (slow on a long queue) does not stop this node either
            checks["webhooks"] = Check(True, webhooks.detail, degraded=True)
        database = checks["database"]
        # The migration check rides on the database's: with no database there is no revision to read.
        checks["migrations"] = Check(True) if self.schema_at_head else (
            Check(False, "database unavailable") if not database.ok else await _bounded(self._migrations()))
        return checks

    async def _database(self) -> Check:
        async with self.db.read() as session:
            await session.execute(text("SELECT 1"))
        return Check(True)

    async def _migrations(self) -> Check:
        head = newest_revision()
        async with self.db.read() as session:
            current = (await session.execute(text("SELECT version_num FROM alembic_version"))).scalars().all()
        if head is not None and list(current) == [head]:
            self.schema_at_head = True
            return Check(True)
        return Check(False, f"schema at {', '.join(current) or 'no revision'}, code expects {head}")

    async def _webhooks(self) -> Check:
        async with self.db.read() as session:
            oldest: datetime | None = (await session.execute(
                select(func.min(WebhookDelivery.due_at)).where(WebhookDelivery.status.in_(_WAITING)))).scalar()
        overdue = (utcnow() - oldest).total_seconds() if oldest is not None else 0.0
        if overdue > self.stall_seconds:
            return Check(True, f"oldest waiting delivery overdue by {int(overdue)} s", degraded=True)
        return Check(True)

    @staticmethod
    async def _redis(limiter: RateLimiter) -> Check:
        await limiter.ping()
        return Check(True)


async def _bounded(probe: Any) -> Check:
    try:
        result: Check = await asyncio.wait_for(probe, CHECK_TIMEOUT_SECONDS)
    except TimeoutError:
        return Check(False, f"no answer within {CHECK_TIMEOUT_SECONDS:g} s")
    except Exception as exc:  # any failure of a dependency is "not ready", never a 500
        return Check(False, type(exc).__name__)
    return result
