"""Delivery workers: claim due deliveries, send them, record what happened.

Claims are leases. A worker marks the deliveries it takes with its id and `claimed_until` (now + lease, now
by the database's clock on PostgreSQL, which every host's workers share; see DeliveryWorker); on
PostgreSQL the claim selects with FOR UPDATE SKIP LOCKED, so workers
on many hosts never take the same row; on SQLite the claim runs in a write transaction, one claimer at a
time. A worker killed mid-delivery simply stops renewing nothing: once its lease has passed, its deliveries
are due again and another worker sends them (the receiver may then see that delivery twice; the
X-Governance-Delivery id lets it notice). Results are written only while the claim is still ours: the row still
names this worker and the lease this claim set (a lease that ran out and was taken again, by another worker or by
this one, is another claim).

Each delivery's lease is at least its webhook's timeout plus LEASE_MARGIN_SECONDS (`lease_seconds`), whatever
PRISM_WEBHOOK_LEASE_SECONDS says: a send ends by its timeout (connect, send and answer together), so a live
worker's claim cannot run out while its send may still be going on, and no second worker sends the same delivery
at the same time.

Schedule (DESIGN.md): attempt 1 at once, then base·2^(n-1) seconds after attempt n; FAILED after attempt
max_retries + 1. A 429/503 Retry-After may push the next attempt later (never earlier), up to a ceiling.
410 Gone fails the delivery and deactivates the webhook; so do N consecutive FAILED deliveries.

A receiver that hangs (HANGING_AFTER_TIMEOUTS sends in a row were slow: they ran to their timeout, or answered
only after half of it, `Attempt.slow`) has its webhook's other due deliveries held back by one timeout (`_hold`):
within an organization claims take the oldest due deliveries first (organizations take turns, claim_order), so
otherwise its backlog would fill every slot it is given, a timeout at a time, while the organization's other
webhooks' deliveries waited. Answering just before the timeout does not escape it, nor does answering 2xx.

A delivery whose receiver's host found no lookup thread free (`Attempt.lookup_busy`: every one of the process's
taken, or its organization's share, prism.kit.outbound.DELIVERY_LOOKUPS) was not sent: it is put off by
RESOLVE_WITHIN_SECONDS with its status and attempt count unchanged, and counts toward no failure run. Another
organization's receivers whose DNS stalls must not cost a webhook its attempts, nor switch it off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, Interval, String, Table, Text, bindparam, func, select, type_coerce, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from prism.config import Settings
from prism.kit.outbound import DELIVERY_LOOKUPS, RESOLVE_WITHIN_SECONDS, OutboundClient
from prism.kit.timeutil import utcnow
from prism.models import OutboxEvent
from prism.models.base import UTCDateTime
from prism.observability.metrics import WEBHOOK_DELIVERIES
from prism.storage import Database, unavailable_error
from prism.storage.errors import RETRY_AFTER_SECONDS
from prism.webhooks import postgres_queue, signal
from prism.webhooks.claim_order import fair_pick_ranking_all
from prism.webhooks.matching import still_wanted
from prism.webhooks.models import Webhook, WebhookDelivery
from prism.webhooks.repository import NOT_SENT_INACTIVE, NOT_SENT_UNSUBSCRIBED, fail_unsent
from prism.webhooks.sender import Attempt, attempt, delivery_headers
from prism.webhooks.signing import SealBroken, unseal

log = logging.getLogger("prism.webhooks")
_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[assignment]
_RECORD_SUCCESS = (
    update(_DELIVERIES)
    .where(_DELIVERIES.c.id == bindparam("b_id", type_=String()),
           _DELIVERIES.c.claimed_by == bindparam("b_me", type_=String()),
           _DELIVERIES.c.claimed_until == bindparam("b_until", type_=UTCDateTime()))
    .values(status="success", attempt_count=bindparam("b_attempts", type_=Integer()),
            response_status_code=bindparam("b_code", type_=Integer()), response_body=bindparam("b_body", type_=Text()),
            error_message=None, claimed_by=None, claimed_until=None, due_at=None,
            delivered_at=bindparam("b_at", type_=UTCDateTime())))

_LEASE = (update(_DELIVERIES).where(_DELIVERIES.c.id == bindparam("b_id", type_=String()))
          .values(claimed_by=bindparam("b_me", type_=String()),
                  claimed_until=bindparam("b_until", type_=UTCDateTime())))

Clock = Callable[[], datetime]
OUTCOMES_WAITING_PER_SLOT = 4
# Slow sends to one webhook in a row (timed out, or answered after half the timeout; no prompt answer between)
# before its receiver counts as hanging; fewer would hold back a busy receiver's queue for one slow answer.
HANGING_AFTER_TIMEOUTS = 3
# How much longer than its send's timeout a claim lasts at least: the time to record the outcome once the send
# has ended (the results transaction, behind up to OUTCOMES_WAITING_PER_SLOT outcomes per slot).
LEASE_MARGIN_SECONDS = 15.0


def lease_seconds(settings: Settings, timeout_seconds: int) -> float:
    """How long a claim of a delivery to a webhook with this timeout lasts: the setting, but never less than the
    send can take plus the margin to record its outcome."""
    return max(settings.webhook_lease_seconds, timeout_seconds + LEASE_MARGIN_SECONDS)


def _due(now: datetime) -> tuple[Any, ...]:
    """Due now and not leased to a live worker (an expired lease counts as free)."""
    return (WebhookDelivery.due_at <= now,
            WebhookDelivery.claimed_until.is_(None) | (WebhookDelivery.claimed_until < now))


@dataclass(frozen=True, slots=True)
class Job:
    delivery_id: str
    organization_id: str
    webhook_id: str
    event_type: str
    status: str  # when claimed: pending or retrying
    attempt_count: int
    is_test: bool
    payload: bytes
    url: str
    sealed: str
    is_active: bool
    events: list[str]  # the webhook's subscription when the delivery was claimed
    filters: dict[str, list[str]] | None
    max_retries: int
    retry_delay_seconds: int
    timeout_seconds: int
    leased_until: datetime  # with the worker's id, names this claim: its outcome is written only while both hold


def _job(row: Any, leased_until: datetime) -> Job:
    return Job(delivery_id=row.id, organization_id=row.organization_id, webhook_id=row.webhook_id,
               event_type=row.event_type, status=row.status, attempt_count=row.attempt_count, is_test=row.is_test,
               payload=row.payload.encode(), url=row.url,
               sealed=row.sealed, is_active=row.is_active, events=row.events or [], filters=row.filters,
               max_retries=row.max_retries,
               retry_delay_seconds=row.retry_delay_seconds, timeout_seconds=row.timeout_seconds,
               leased_until=leased_until)


# An outcome waiting to be written: the job, its column values, whether the receiver answered 410 Gone, whether
# its receiver hangs (its webhook's queue is held back), and the future its `record` call waits on.
Outcome = tuple[Job, dict[str, Any], bool, bool, "asyncio.Future[None]"]


def _settle(outcomes: list[Outcome], error: Exception | None) -> None:
    for *_, future in outcomes:
        if not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)


def retry_delay(base: int, attempts_made: int) -> int:
    """Seconds between attempt n (= attempts_made) and attempt n+1."""
    return int(base * 2 ** (attempts_made - 1))


def new_worker_id() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class DeliveryWorker:
    def __init__(self, db: Database, settings: Settings, *, clock: Clock | None = None,
                 concurrency: int | None = None) -> None:
        """`clock`: the time the schedule follows. By default, on PostgreSQL, the database's (`now()` in the
        claim, lease, retry and hold statements): workers on many hosts share it whatever their own clocks say.
        On SQLite (one host) this host's. A test that moves time gives all its workers one clock of its own."""
        self.db = db
        self.settings = settings
        self.clock = clock or utcnow
        self._database_clock = clock is None and not db.is_sqlite
        self.worker_id = new_worker_id()
        self.concurrency = concurrency or settings.webhook_worker_concurrency
        # Receivers' hosts are resolved on threads of their own (DELIVERY_LOOKUPS): a backlog to hosts whose DNS
        # never answers would otherwise take every thread of the event loop's shared pool from the rest of the
        # process (prism serve's password checks, other lookups) until the system resolver gave up.
        self.client = OutboundClient(
            allow_private_networks=settings.webhook_allow_private_networks, ca_bundle=settings.webhook_ca_bundle,
            max_connections=self.concurrency * 2, lookups=DELIVERY_LOOKUPS)
        self._wake = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()  # deliveries being sent or waiting for their outcome's write
        self._sending = 0  # of those, the ones being sent (each holds one of `concurrency` slots)
        self._results: list[Outcome] = []
        self._results_ready = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._timeouts: dict[str, int] = {}  # per webhook: this worker's slow sends in a row (Attempt.slow)
        # PostgreSQL: claims and successes are single statements, each its own transaction (postgres_queue).
        self._autocommit: AsyncEngine | None = (
            None if db.is_sqlite else db.engine.execution_options(isolation_level="AUTOCOMMIT"))

    async def close(self) -> None:
        tasks = [*self._tasks, *([self._writer] if self._writer is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.client.close()

    def stop_claiming(self) -> None:
        """`run` returns once the claim in progress (if any) ends; deliveries already claimed go on."""
        self._stop_requested.set()
        self._wake.set()

    async def finish_in_flight(self, grace_seconds: float) -> None:
        """Wait up to `grace_seconds` for claimed deliveries to be sent and their outcomes written; `close` then
        cancels what is left (its lease runs out and it is sent again: nothing is lost)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace_seconds)

    async def run(self) -> None:
        """Deliver until `stop_claiming` (or cancelled); wakes at once for deliveries of this process, else polls.

        A slot is taken while a delivery is being sent, not while its outcome waits for the results
        transaction: the next claim does not wait on the database. Outcomes waiting to be written are
        bounded (OUTCOMES_WAITING_PER_SLOT per slot), so a slow database slows the claims down instead.
        """
        signal.register(self._wake)
        try:
            while not self._stop_requested.is_set():
                self._wake.clear()
                free = min(self.concurrency - self._sending,
                           self.concurrency * OUTCOMES_WAITING_PER_SLOT - len(self._tasks))
                # Claim in batches (a quarter of the slots at least) rather than one row per finished send.
                worth_it = free >= max(1, self.concurrency // 4) or not self._tasks
                jobs = await self._claim_logged(free) if worth_it and free > 0 else []
                self._sending += len(jobs)  # taken now: the tasks below may not run before the next claim
                for job in jobs:
                    task = asyncio.create_task(self._deliver(job), name=f"prism-webhook-{job.delivery_id}")
                    self._tasks.add(task)
                    task.add_done_callback(self._finished)
                if jobs and len(jobs) == free:
                    continue  # there may be more due right now
                if not worth_it or free <= 0:
                    await self._wake.wait()  # a send or a task finishing sets it
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.settings.webhook_poll_seconds)
        finally:
            signal.unregister(self._wake)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._wake.set()

    def _sent(self) -> None:
        self._sending -= 1
        self._wake.set()  # a slot is free

    async def run_once(self) -> int:
        """Claim and deliver what is due now, waiting for every attempt; returns how many were attempted."""
        jobs = await self.claim(self.concurrency)
        self._sending += len(jobs)
        await asyncio.gather(*(self._deliver(job) for job in jobs))
        return len(jobs)

    async def _claim_logged(self, limit: int) -> list[Job]:
        try:
            return await self.claim(limit)
        except Exception as exc:
            busy = unavailable_error(exc)
            if busy is None:
                log.exception("could not claim webhook deliveries")
            else:  # expected while the database is busy or restarting: one line, then wait as it asks
                log.warning("could not claim webhook deliveries: %s", busy.message)
            with contextlib.suppress(TimeoutError):  # a stop does not wait for the pause to end
                await asyncio.wait_for(self._stop_requested.wait(),
                                       max(self.settings.webhook_poll_seconds, RETRY_AFTER_SECONDS if busy else 0))
            return []

    async def claim(self, limit: int) -> list[Job]:
        """Lease up to `limit` due deliveries, each for `lease_seconds` of its webhook's timeout."""
        now = self.clock()
        if self._autocommit is not None:
            async with self._autocommit.connect() as connection:
                return [_job(r, r.claimed_until) for r in await postgres_queue.claim(
                    connection, me=self.worker_id, now=None if self._database_clock else now,
                    lease=self.settings.webhook_lease_seconds,
                    margin=LEASE_MARGIN_SECONDS, limit=limit)]
        # SQLite: an idle poll must not take its one write lock (the ledger waits on it): look first, and choose
        # the deliveries (organizations taking turns, claim_order: a sort of the due ones) before taking it.
        async with self.db.read() as session:
            if (await session.execute(select(WebhookDelivery.id).where(*_due(now)).limit(1))).first() is None:
                return []
            chosen = list((await session.execute(fair_pick_ranking_all(now, limit))).scalars())
        async with self.db.write() as session:
            now = self.clock()  # the leases start once the write lock is ours, not before waiting for it
            # Those still due and free: another worker's claim may have taken some since they were chosen.
            ids = list((await session.execute(select(WebhookDelivery.id).where(
                WebhookDelivery.id.in_(chosen), *_due(now)))).scalars())
            if not ids:
                return []
            rows = (await session.execute(
                select(WebhookDelivery.id, WebhookDelivery.organization_id, WebhookDelivery.webhook_id,
                       WebhookDelivery.event_type, WebhookDelivery.status, WebhookDelivery.attempt_count,
                       WebhookDelivery.is_test, OutboxEvent.payload, Webhook.url,
                       Webhook.sealed, Webhook.is_active, Webhook.events, Webhook.filters, Webhook.max_retries,
                       Webhook.retry_delay_seconds, Webhook.timeout_seconds)
                .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
                .join(OutboxEvent, OutboxEvent.id == WebhookDelivery.event_id)
                .where(WebhookDelivery.id.in_(ids)))).all()
            if not rows:
                return []
            jobs = [_job(r, now + timedelta(seconds=lease_seconds(self.settings, r.timeout_seconds))) for r in rows]
            await session.execute(_LEASE, [{"b_id": job.delivery_id, "b_me": self.worker_id,
                                            "b_until": job.leased_until} for job in jobs])
            return jobs

    async def _deliver(self, job: Job) -> None:
        """Send (holding the slot its caller took), then wait until the outcome is written (not holding one).

        A slow send (`Attempt.slow`) keeps its slot until its outcome is written: that write may hold back its
        webhook's queue (`_hold`), and a claim made before it would take more of the hanging receiver's deliveries."""
        held = True
        try:
            try:
                outcome, counts = await self._send(job)
                if not outcome.slow:
                    held = False
                    self._sent()
                await self.record(job, outcome, count_attempt=counts)
            finally:
                if held:
                    self._sent()
        except asyncio.CancelledError:
            raise
        except Exception:
            # The lease runs out and another attempt follows: nothing is lost.
            log.exception("delivery %s could not be completed", job.delivery_id)

    async def _send(self, job: Job) -> tuple[Attempt, bool]:
        """The attempt's outcome, and whether it counts as an attempt (nothing sent does not, `lookup_busy`
        included)."""
        if not job.is_active:  # test events included: an inactive webhook never delivers (SPEC.md)
            return Attempt(False, None, "", NOT_SENT_INACTIVE, None), False
        # A test event is addressed to its webhook whatever it subscribes to; any other must still be wanted.
        if not job.is_test and not still_wanted(job.events, job.filters, job.event_type, job.payload):
            return Attempt(False, None, "", NOT_SENT_UNSUBSCRIBED, None), False
        try:
            opened = unseal(self.settings, job.webhook_id, job.sealed)
        except SealBroken as exc:
            return Attempt(False, None, "", str(exc), None), False
        headers = delivery_headers(secrets=opened.signing_secrets(self.clock()), body=job.payload,
                                   event_type=job.event_type, delivery_id=job.delivery_id, custom=opened.headers)
        outcome = await attempt(self.client, url=job.url, body=job.payload, headers=headers,
                                timeout_seconds=job.timeout_seconds, organization_id=job.organization_id)
        return outcome, not outcome.lookup_busy

    async def record(self, job: Job, outcome: Attempt, *, count_attempt: bool = True) -> None:
        """Queue the outcome of a claimed job for the next results write and wait until it is written.

        Outcomes finishing together are written together: a commit per delivery would make the database,
        not the receivers, the limit of a worker's throughput. Raises when this outcome could not be written
        (its lease runs out and the delivery is sent again); never because another outcome could not."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        values = self._outcome_values(job, outcome, count_attempt)
        if not outcome.lookup_busy:  # put off unsent: no attempt to count
            WEBHOOK_DELIVERIES.labels(values["status"]).inc()  # success, retrying or failed
        self._results.append((job, values, outcome.status_code == 410, self._hanging(job, outcome), future))
        self._results_ready.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_results_forever(), name="prism-webhook-results")
        await future

    def _hanging(self, job: Job, outcome: Attempt) -> bool:
        """Whether this outcome makes HANGING_AFTER_TIMEOUTS slow sends in a row for its webhook; a prompt answer
        (or an outcome without a send) ends the run; a delivery put off for want of a lookup thread leaves it as it
        is (it says nothing of the receiver)."""
        if outcome.lookup_busy:
            return False
        if not outcome.slow:
            self._timeouts.pop(job.webhook_id, None)
            return False
        run = self._timeouts[job.webhook_id] = self._timeouts.get(job.webhook_id, 0) + 1
        return run >= HANGING_AFTER_TIMEOUTS

    def _outcome_values(self, job: Job, outcome: Attempt, count_attempt: bool) -> dict[str, Any]:
        if outcome.lookup_busy:
            # Nothing was sent: the delivery keeps its status, attempt count and last attempt's answer, and is due
            # again once a lookup thread may be free (a lookup stops being waited for within that time).
            return {"status": job.status, "attempt_count": job.attempt_count, "claimed_by": None,
                    "claimed_until": None, "due_at": self._later(RESOLVE_WITHIN_SECONDS)}
        now = self.clock()
        attempts = job.attempt_count + (1 if count_attempt else 0)
        values: dict[str, Any] = {
            "attempt_count": attempts, "response_status_code": outcome.status_code,
            "response_body": outcome.body, "error_message": outcome.error,
            "claimed_by": None, "claimed_until": None,
        }
        if outcome.ok:
            values.update(status="success", delivered_at=now, due_at=None)
        elif count_attempt and outcome.status_code != 410 and attempts <= job.max_retries:
            delay = retry_delay(job.retry_delay_seconds, attempts)
            if outcome.retry_after is not None:
                ceiling = self.settings.webhook_retry_after_max_seconds
                delay = max(delay, min(int(outcome.retry_after + 0.999), ceiling))
            values.update(status="retrying", due_at=self._later(delay))
        else:
            values.update(status="failed", due_at=None)
        return values

    async def _write_results_forever(self) -> None:
        while True:
            while not self._results:
                self._results_ready.clear()
                await self._results_ready.wait()
            await asyncio.sleep(0)  # outcomes finishing in this loop turn join the batch
            batch, self._results = self._results, []
            try:
                await self._write_batch(batch)
            except Exception as exc:
                if len(batch) == 1 or unavailable_error(exc) is not None:
                    log.exception("could not record %d webhook delivery outcomes", len(batch))
                    _settle(batch, exc)
                else:
                    # One outcome the database refuses must not cost the others: unwritten, their leases
                    # would run out and their receivers would get them again. Each is written on its own.
                    log.warning("could not record %d webhook delivery outcomes together (%s); recording each "
                                "on its own", len(batch), exc)
                    await self._write_each(batch)
                continue
            _settle(batch, None)

    async def _write_each(self, batch: list[Outcome]) -> None:
        for index, outcome in enumerate(batch):
            try:
                await self._write_batch([outcome])
            except Exception as exc:
                if unavailable_error(exc) is not None:  # an outage, not this outcome: the rest would fail too
                    log.exception("could not record %d webhook delivery outcomes", len(batch) - index)
                    _settle(batch[index:], exc)
                    return
                log.exception("could not record the outcome of delivery %s", outcome[0].delivery_id)
                _settle([outcome], exc)
            else:
                _settle([outcome], None)

    async def _write_batch(self, batch: list[Outcome]) -> None:
        """Successes (nearly everything) in one statement; retries and failures one by one, with their
        accounting. Every write applies only while the claim is still ours (a lease taken over is not)."""
        successes = [(job, values) for job, values, *_ in batch if values["status"] == "success"]
        others = [(job, values, gone, hanging) for job, values, gone, hanging, _ in batch
                  if values["status"] != "success"]
        # A receiver answering 2xx only after half its timeout holds the slots as long as one failing as slowly: its
        # webhook is held back all the same (the others' holds follow their own writes, `_write_others`).
        slow_successes = [job for job, values, _, hanging, _ in batch if hanging and values["status"] == "success"]
        if self._autocommit is not None:
            if successes:
                async with self._autocommit.connect() as connection:
                    await postgres_queue.record_successes(connection, me=self.worker_id, outcomes=[
                        {"id": job.delivery_id, "leased_until": job.leased_until, **values}
                        for job, values in successes])
            if others or slow_successes:
                async with self.db.write() as session:
                    for job in slow_successes:
                        await self._hold(session, job)
                    await self._write_others(session, others)
            return
        async with self.db.write() as session:  # SQLite: the whole batch in one transaction
            if successes:
                await self._write_successes(session, successes)
            for job in slow_successes:
                await self._hold(session, job)
            await self._write_others(session, others)

    async def _write_successes(self, session: AsyncSession, successes: list[tuple[Job, dict[str, Any]]]) -> None:
        """SQLite's path (PostgreSQL's is postgres_queue.record_successes): one executemany, then the end of
        the webhooks' failure runs, writing a webhook row only when its counter is not already zero."""
        await session.execute(_RECORD_SUCCESS, [
            {"b_id": job.delivery_id, "b_me": self.worker_id, "b_until": job.leased_until,
             "b_attempts": values["attempt_count"],
             "b_code": values["response_status_code"], "b_body": values["response_body"],
             "b_at": values["delivered_at"]} for job, values in successes])
        recovered = sorted({job.webhook_id for job, _ in successes if not job.is_test})
        if recovered:
            await session.execute(update(Webhook).where(Webhook.id.in_(recovered), Webhook.consecutive_failures != 0)
                                  .values(consecutive_failures=0))

    async def _write_others(self, session: AsyncSession,
                            others: list[tuple[Job, dict[str, Any], bool, bool]]) -> None:
        for job, values, gone, hanging in others:
            written = await session.execute(
                update(WebhookDelivery).where(WebhookDelivery.id == job.delivery_id,
                                              WebhookDelivery.claimed_by == self.worker_id,
                                              WebhookDelivery.claimed_until == job.leased_until).values(**values))
            if getattr(written, "rowcount", 0) != 1:
                continue
            if hanging:
                await self._hold(session, job)
            # Only what reached (or tried to reach) the receiver counts toward its failure run: a delivery ended
            # unsent (its webhook off, its event no longer subscribed, a seal that does not open) says nothing of it.
            if not job.is_test and values["attempt_count"] > job.attempt_count:
                await self._account(session, job, values["status"], gone=gone)

    async def _hold(self, session: AsyncSession, job: Job) -> None:
        """Hold back the hanging receiver's deliveries due now (none leased, no test event) by one timeout, so that
        the next claims reach other webhooks' deliveries. Rows held earlier are due later and left alone: while
        the receiver hangs, each row is moved about once per timeout, not once per send that times out."""
        now = func.now() if self._database_clock else self.clock()
        await session.execute(update(WebhookDelivery).where(
            WebhookDelivery.webhook_id == job.webhook_id, WebhookDelivery.due_at <= now,
            WebhookDelivery.is_test.is_(False),
            WebhookDelivery.claimed_until.is_(None) | (WebhookDelivery.claimed_until < now),
        ).values(due_at=self._later(job.timeout_seconds)))

    def _later(self, seconds: float) -> Any:
        """`seconds` from now by the schedule's clock: a statement's expression on the database's clock."""
        if self._database_clock:
            return func.now() + type_coerce(func.make_interval(0, 0, 0, 0, 0, 0, seconds), Interval())
        return self.clock() + timedelta(seconds=seconds)

    async def _account(self, session: AsyncSession, job: Job, status: str, *, gone: bool) -> None:
        """Consecutive FAILED deliveries per webhook; 410 or too many failures switch the webhook off."""
        where = Webhook.id == job.webhook_id
        if status != "failed" or not job.is_active:
            return
        now = func.now() if self._database_clock else self.clock()
        if gone:
            await session.execute(update(Webhook).where(where).values(
                is_active=False, deactivated_reason="the receiver answered 410 Gone", updated_at=self.clock()))
            await fail_unsent(session, job.webhook_id, now)
            return
        await session.execute(update(Webhook).where(where)
                              .values(consecutive_failures=Webhook.consecutive_failures + 1))
        limit = self.settings.webhook_deactivate_after_failures
        if limit > 0:
            switched_off = await session.execute(update(Webhook).where(
                where, Webhook.consecutive_failures >= limit, Webhook.is_active.is_(True)).values(
                is_active=False, updated_at=self.clock(),
                deactivated_reason=f"{limit} consecutive deliveries failed"))
            if getattr(switched_off, "rowcount", 0) == 1:
                await fail_unsent(session, job.webhook_id, now)
