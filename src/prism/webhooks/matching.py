"""Which active webhooks of an organization want an event, and the delivery rows that follow.

Called by `prism.events.outbox.emit` inside the transaction that records the event, so an event and its
deliveries commit (or vanish) together.

The active webhooks of an organization are read once per transaction and kept for the rest of that transaction
only (a ledger batch emitting many events asks once): a webhook created, changed or deleted is honoured by the
next transaction. Deliveries are inserted from a SELECT of the webhooks still active at that moment, so a webhook
deleted meanwhile (by another process, or in a SAVEPOINT rolled back) is skipped rather than failing the
transaction on its foreign key; on PostgreSQL that SELECT also takes a KEY SHARE lock on the rows it reads, so
a concurrent delete waits for this transaction instead of removing a row under it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Table, bindparam, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.events.catalog import GOVERNANCE_EVENT_TYPES
from prism.storage.prepared import PreparedRead
from prism.webhooks.models import Webhook, WebhookDelivery
from prism.webhooks.signal import wake_workers_after_commit

_CACHE = "prism.webhooks.active"
_GOVERNANCE = frozenset(GOVERNANCE_EVENT_TYPES)


@dataclass(frozen=True, slots=True)
class ActiveWebhook:
    id: str
    events: frozenset[str]
    filters: dict[str, list[str]]

    def wants(self, event_type: str) -> bool:
        return subscribes(self.events, event_type)


def subscribes(events: Collection[str], event_type: str) -> bool:
    """Whether a webhook subscribed to `events` (none named: every governance type) wants `event_type`."""
    return event_type in events if events else event_type in _GOVERNANCE


def new_delivery_id() -> str:
    return "del_" + uuid.uuid4().hex


def _event_value(key: str, data: dict[str, Any]) -> Any:
    """The event attribute a filter narrows on; None when the event does not carry it."""
    if key == "ai_system_ids":
        system = data.get("ai_system")
        return system.get("id") if isinstance(system, dict) else data.get("ai_system_id")
    if key == "risk_levels":
        # Violations state a severity; other events may carry a risk_level.
        return data.get("risk_level", data.get("severity"))
    if key == "decision_types":
        return data.get("decision_type")
    return None


def matches(events: Collection[str], filters: dict[str, list[str]], event_type: str, data: dict[str, Any]) -> bool:
    """`events` (empty: every governance type) AND each given filter. An event that lacks the attribute a
    filter names does not match it: a narrowed subscription receives only what provably fits."""
    if not subscribes(events, event_type):
        return False
    for key, allowed in filters.items():
        if not allowed:
            continue
        value = _event_value(key, data)
        if value is None or str(value) not in allowed:
            return False
    return True


def still_wanted(events: Collection[str], filters: dict[str, list[str]] | None, event_type: str,
                 payload: str | bytes) -> bool:
    """Whether a webhook subscribed as it is now wants an event fanned out to it earlier (`payload`: the event's
    envelope as stored). Asked again when the delivery is sent or resent: a subscription narrowed since must keep
    the event from the receiver, whoever points the webhook elsewhere after (docs/webhooks.md)."""
    data = orjson.loads(payload).get("data")
    return matches(events, filters or {}, event_type, data if isinstance(data, dict) else {})


async def active_webhooks(session: AsyncSession, organization_ids: Iterable[str]) -> dict[str, list[ActiveWebhook]]:
    """Active webhooks per organization, as read earlier in this transaction or by one query for the rest."""
    cache = _transaction_cache(session)
    wanted = set(organization_ids)
    missing = wanted - cache.keys()
    if missing:
        for org_id in missing:
            cache[org_id] = []
        for row in await _active_rows(session, missing):
            cache[row["organization_id"]].append(
                ActiveWebhook(row["id"], frozenset(row["events"] or ()), dict(row["filters"] or {})))
    return {org_id: cache[org_id] for org_id in wanted}


async def _active_rows(session: AsyncSession, organization_ids: set[str]) -> list[dict[str, Any]]:
    """One organization (every call's batch, mostly): a prepared read; several: one query for all."""
    if len(organization_ids) == 1:
        return await _ACTIVE_OF_ORGANIZATION.all(session, {"organization_id": next(iter(organization_ids))})
    rows = await session.execute(select(*_ACTIVE_COLUMNS).where(
        _webhooks.c.organization_id.in_(organization_ids), _webhooks.c.is_active.is_(True)))
    return [dict(row) for row in rows.mappings()]


def _transaction_cache(session: AsyncSession) -> dict[str, list[ActiveWebhook]]:
    """The webhooks read in the session's current transaction; a new transaction starts with none."""
    transaction = session.sync_session.get_transaction()
    kept: tuple[object, dict[str, list[ActiveWebhook]]] | None = session.info.get(_CACHE)
    if kept is None or kept[0] is not transaction:
        kept = session.info[_CACHE] = (transaction, {})
    return kept[1]


def forget_active_webhooks(session: AsyncSession) -> None:
    """Called when a webhook changes within a transaction that may also emit."""
    session.info.pop(_CACHE, None)


async def subscribed_organizations(session: AsyncSession, organization_ids: Iterable[str],
                                   event_type: str) -> set[str]:
    found = await active_webhooks(session, organization_ids)
    return {org_id for org_id, hooks in found.items() if any(h.wants(event_type) for h in hooks)}


async def fan_out(session: AsyncSession, *, organization_id: str, event_id: str, event_type: str,
                  data: dict[str, Any], moment: datetime) -> list[str]:
    """Write one PENDING delivery per matching webhook; returns the ids given to them (a webhook that stopped
    being active meanwhile gets none, and its id names no row)."""
    hooks = (await active_webhooks(session, [organization_id]))[organization_id]
    targets = [h.id for h in hooks if matches(h.events, h.filters, event_type, data)]
    if not targets:
        return []
    rows = [{"delivery_id": new_delivery_id(), "webhook_id": webhook_id, "organization": organization_id,
             "event": event_id, "type": event_type, "moment": moment} for webhook_id in targets]
    await session.execute(_INSERT_DELIVERY_FOR_ACTIVE_WEBHOOK, rows)
    wake_workers_after_commit(session)
    return [str(r["delivery_id"]) for r in rows]


_webhooks: Table = Webhook.__table__  # type: ignore[assignment]
_deliveries: Table = WebhookDelivery.__table__  # type: ignore[assignment]
_ACTIVE_COLUMNS = (_webhooks.c.organization_id, _webhooks.c.id, _webhooks.c.events, _webhooks.c.filters)
_ACTIVE_OF_ORGANIZATION = PreparedRead(select(*_ACTIVE_COLUMNS).where(
    _webhooks.c.organization_id == bindparam("organization_id"), _webhooks.c.is_active.is_(True)))


def _typed(name: str, column: str) -> Any:
    return bindparam(name, type_=_deliveries.c[column].type)


def _constant(value: Any, column: str) -> Any:
    return literal(value, _deliveries.c[column].type)


# A PENDING delivery of an event to one webhook, written only while the webhook is active (module docstring).
_INSERT_DELIVERY_FOR_ACTIVE_WEBHOOK = insert(_deliveries).from_select(
    ["id", "organization_id", "webhook_id", "event_id", "event_type", "status", "attempt_count", "response_body",
     "is_test", "due_at", "created_at"],
    select(_typed("delivery_id", "id"), _webhooks.c.organization_id, _webhooks.c.id, _typed("event", "event_id"),
           _typed("type", "event_type"), _constant("pending", "status"), _constant(0, "attempt_count"),
           _constant("", "response_body"), _constant(False, "is_test"), _typed("moment", "due_at"),
           _typed("moment", "created_at"))
    .where(_webhooks.c.id == bindparam("webhook_id"), _webhooks.c.organization_id == bindparam("organization"),
           _webhooks.c.is_active.is_(True))
    .with_for_update(read=True, key_share=True))
