"""Which due deliveries a claim takes: organizations take turns, so one's backlog cannot hold back another's.

Claims used to take the oldest due deliveries first. An organization with a large backlog to a slow receiver
(one that answers, just not quickly, so it is not held back as hanging, worker.py) then filled every slot of
every worker until its backlog was sent, and another organization's delivery, due a moment later, waited behind
all of it.

Now each due delivery gets its organization's turn: the number of its organization's deliveries leased to a
worker right now (being sent), plus its place among its organization's free due ones (1 for the oldest). A claim
takes the lowest turns first, the oldest first among equal turns. So an organization with nothing in flight goes
ahead of one that holds every slot, a claim of N slots takes the oldest of each organization before anyone's
second, and one organization alone still gets every slot (nothing is left idle for fairness).

What a claim reads stays small whatever the backlog: the deliveries in flight (a partial index of leased rows),
and on PostgreSQL, for each organization with deliveries pending, its `limit` oldest free due deliveries (LATERAL,
from ix_webhook_deliveries_pending: organization and due time, only deliveries not yet final). Ranking every due
delivery instead took about a second per claim with 100,000 due.

Those organizations are found by a loose index scan of the same index (`pending_organizations`: a recursive query
taking the first organization after the last one found, one index descent each), not by visiting every organization
that has a webhook. That visit cost every claim (with 10,000 organizations, every poll of an idle worker too) a
probe per organization, most of them with nothing pending: 35 ms of the database's time per claim with 10,000 (half
of it compiling the statement, JIT, which PostgreSQL chose for a plan estimated that large), about 250 s an hour
for one idle worker polling every half second; 0.1 to 0.6 ms now (bench/README.md). What a claim reads now grows
with the organizations that have deliveries pending (a retry scheduled later counts), not with those that have a
webhook nor with their history of final deliveries, which the partial index leaves out.

SQLite has no LATERAL: it ranks every due delivery (one host's backlog), in the worker's read before its write
lock, so the sort never holds up the writers waiting on it. It visits no organization that has nothing due (an idle
poll reads the due index once), so it keeps that way.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, Subquery, Table, func, or_, select, true

from prism.webhooks.models import WebhookDelivery

_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[assignment]


def free(table: Any, now: Any) -> ColumnElement[bool]:
    """Not leased to a live worker (an expired lease counts as free)."""
    return or_(table.c.claimed_until.is_(None), table.c.claimed_until < now)


def _in_flight(now: Any) -> Subquery:
    """Per organization, its deliveries leased to a live worker (ix_webhook_deliveries_leased)."""
    leased = _DELIVERIES.alias("leased")
    return (select(leased.c.organization_id, func.count().label("sending"))
            .where(leased.c.claimed_until >= now).group_by(leased.c.organization_id).subquery("in_flight"))


def _ordered(candidates: Subquery, now: Any, limit: Any) -> Select[Any]:
    """The ids of up to `limit` of `candidates` (id, due_at, organization_id: free due deliveries, each
    organization's oldest among them), lowest turn first. The due and free conditions are repeated on the
    deliveries table itself: on PostgreSQL the caller locks its rows (FOR UPDATE OF it, SKIP LOCKED; a window
    function cannot be in the locking SELECT, so the ranking is a subquery), and a row another claim changed
    meanwhile is checked again on its newest version."""
    in_flight = _in_flight(now)
    place = func.row_number().over(partition_by=candidates.c.organization_id,
                                   order_by=(candidates.c.due_at, candidates.c.id))
    turn = (func.coalesce(in_flight.c.sending, 0) + place).label("turn")
    # The first turns only, twice the claim's size (room for rows another claim is locking right now): the
    # deliveries table is then joined on a handful of ids.
    ranked = (select(candidates.c.id, candidates.c.due_at, turn)
              .join_from(candidates, in_flight, in_flight.c.organization_id == candidates.c.organization_id,
                         isouter=True)
              .order_by(turn, candidates.c.due_at, candidates.c.id).limit(limit * 2)
              .subquery("ranked"))
    d = _DELIVERIES.c
    return (select(d.id).join_from(_DELIVERIES, ranked, ranked.c.id == d.id)
            .where(d.due_at <= now, free(_DELIVERIES, now))
            .order_by(ranked.c.turn, ranked.c.due_at, ranked.c.id)
            .limit(limit))


def pending_organizations() -> Subquery:
    """The organizations with deliveries pending (due_at set: not final), found by a loose index scan of
    ix_webhook_deliveries_pending: the first organization, then again and again the first after the last one
    found, one index descent each. What it reads grows with those organizations, not with every organization that
    has a webhook or a history of final deliveries."""
    first = _DELIVERIES.alias("first_pending")
    found = (select(first.c.organization_id).where(first.c.due_at.is_not(None))
             .order_by(first.c.organization_id).limit(1).cte("pending_organizations", recursive=True))
    after = _DELIVERIES.alias("next_pending")
    following = (select(after.c.organization_id)
                 .where(after.c.due_at.is_not(None), after.c.organization_id > found.c.organization_id)
                 .order_by(after.c.organization_id).limit(1).scalar_subquery())
    found = found.union_all(select(following.label("organization_id")).where(found.c.organization_id.is_not(None)))
    return select(found.c.organization_id).where(found.c.organization_id.is_not(None)).subquery("organizations")


def fair_pick(now: Any, limit: Any) -> Select[Any]:
    """PostgreSQL: for each organization with deliveries pending (`pending_organizations`), its `limit` oldest free
    due deliveries (ix_webhook_deliveries_pending), then up to `limit` of them, lowest turn first. `now`, `limit`:
    values or bound parameters."""
    organizations = pending_organizations()
    due = _DELIVERIES.alias("due")
    organization = organizations.c.organization_id
    # The organization is written as a range, and ordered by: only an index on (organization_id, due_at) then
    # gives the order, and the scan stops after `limit` rows. Written as an equality, PostgreSQL takes the order as
    # due_at alone and, its estimate misled by the history (final deliveries, due_at null) that makes up most of
    # an organization's rows, scanned the due index for the organization's rows: 20 ms per organization with
    # 100,000 deliveries due, 10 µs this way.
    oldest = (select(due.c.id, due.c.due_at, due.c.organization_id)
              .where(due.c.organization_id >= organization, due.c.organization_id <= organization,
                     due.c.due_at <= now, free(due, now))
              .order_by(due.c.organization_id, due.c.due_at).limit(limit).lateral("oldest"))
    candidates = (select(oldest.c.id, oldest.c.due_at, oldest.c.organization_id)
                  .join_from(organizations, oldest, true()).subquery("candidates"))
    return _ordered(candidates, now, limit)


def fair_pick_ranking_all(now: Any, limit: Any) -> Select[Any]:
    """SQLite (no LATERAL): every free due delivery is a candidate; the same order as `fair_pick`."""
    due = _DELIVERIES.alias("due")
    candidates = (select(due.c.id, due.c.due_at, due.c.organization_id)
                  .where(due.c.due_at <= now, free(due, now)).subquery("candidates"))
    return _ordered(candidates, now, limit)
