"""Which active webhooks of an organization want an event, and the delivery rows that follow.

Called by `prism.events.outbox.emit` inside the transaction that records the event, so an event and its
deliveries commit (or vanish) together. Organizations without webhooks pay one indexed query per
transaction: the active webhooks of an organization are loaded once and kept on the session for the rest
of its transaction (a ledger batch emitting many events asks once).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.events.catalog import GOVERNANCE_EVENT_TYPES
from prism.kit.prepared import Prepared
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
        return event_type in self.events if self.events else event_type in _GOVERNANCE


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


def matches(webhook: ActiveWebhook, event_type: str, data: dict[str, Any]) -> bool:
    """`events` (empty: every governance type) AND each given filter. An event that lacks the attribute a
    filter names does not match it: a narrowed subscription receives only what provably fits."""
    if not webhook.wants(event_type):
        return False
    for key, allowed in webhook.filters.items():
        if not allowed:
            continue
        value = _event_value(key, data)
        if value is None or str(value) not in allowed:
            return False
    return True


async def active_webhooks(session: AsyncSession, organization_ids: Iterable[str]) -> dict[str, list[ActiveWebhook]]:
    """Active webhooks per organization, from the transaction's cache or one query for the missing ones."""
    cache: dict[str, list[ActiveWebhook]] = session.info.setdefault(_CACHE, {})
    missing = sorted(set(organization_ids) - set(cache))
    for org_id in missing:  # a batch names one or two organizations: one indexed, prepared read each
        cache[org_id] = [ActiveWebhook(r["id"], frozenset(r["events"] or ()), dict(r["filters"] or {}))
                         for r in await _ACTIVE_OF_ORGANIZATION.fetch_all(session, org_id=org_id)]
    return {org_id: cache[org_id] for org_id in organization_ids}


# Asked on every ledger batch (for audit.entry_created) and every emitted event: the prepared path.
_ACTIVE_OF_ORGANIZATION = Prepared(
    select(Webhook.__table__.c.id, Webhook.__table__.c.events, Webhook.__table__.c.filters)
    .where(Webhook.__table__.c.organization_id == bindparam("org_id"), Webhook.__table__.c.is_active.is_(True)))


def forget_active_webhooks(session: AsyncSession) -> None:
    """Called when a webhook changes within a transaction that may also emit."""
    session.info.pop(_CACHE, None)


async def subscribed_organizations(session: AsyncSession, organization_ids: Iterable[str],
                                   event_type: str) -> set[str]:
    found = await active_webhooks(session, organization_ids)
    return {org_id for org_id, hooks in found.items() if any(h.wants(event_type) for h in hooks)}


async def fan_out(session: AsyncSession, *, organization_id: str, event_id: str, event_type: str,
                  data: dict[str, Any], moment: datetime) -> list[str]:
    """Write one PENDING delivery per matching webhook; returns their ids."""
    hooks = (await active_webhooks(session, [organization_id]))[organization_id]
    targets = [h.id for h in hooks if matches(h, event_type, data)]
    if not targets:
        return []
    rows: list[dict[str, Any]] = [
        {"id": new_delivery_id(), "organization_id": organization_id, "webhook_id": webhook_id,
         "event_id": event_id, "event_type": event_type, "status": "pending", "attempt_count": 0,
         "response_body": "", "is_test": False, "due_at": moment, "created_at": moment}
        for webhook_id in targets]
    await session.execute(insert(WebhookDelivery), rows)
    wake_workers_after_commit(session)
    return [str(r["id"]) for r in rows]
