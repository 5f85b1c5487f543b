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
and on PostgreSQL, for each organization that has a webhook, its `limit` oldest free due deliveries (an index
on organization and due time, LATERAL): about 10 µs per organization. Ranking every due delivery instead took
about a second per claim with 100,000 due. SQLite has no LATERAL: it ranks every due delivery (one host's
backlog), in the worker's read before its write lock, so the sort never holds up the writers waiting on it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, Subquery, Table, func, or_, select, true

from prism.webhooks.models import Webhook, WebhookDelivery

_DELIVERIES: Table = WebhookDelivery.__table__  # type: ignore[assignment]
_WEBHOOKS: Table = Webhook.__table__  # type: ignore[assignment]


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


def fair_pick(now: Any, limit: Any) -> Select[Any]:
    """PostgreSQL: for each organization with a webhook, its `limit` oldest free due deliveries
    (ix_webhook_deliveries_org_due), then up to `limit` of them, lowest turn first. `now`, `limit`: values or
    bound parameters."""
    organizations = select(_WEBHOOKS.c.organization_id).distinct().subquery("organizations")
    due = _DELIVERIES.alias("due")
    organization = organizations.c.organization_id
    # The organization is written as a range, and ordered by: only ix_webhook_deliveries_org_due then gives the
    # order, and the scan stops after `limit` rows. Written as an equality, PostgreSQL takes the order as due_at
    # alone and, its estimate misled by the history (final deliveries, due_at null) that makes up most of an
    # organization's rows, scanned the due index for the organization's rows: 20 ms per organization with
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
