"""The event outbox: every event is a row written in the transaction of the change that caused it.

Nothing is sent from here. Writing the event with the change means an event exists exactly when the
change committed — never an event for a rolled-back change, never a committed change without its event.
Webhook delivery reads what was committed.

The envelope (SPEC.md "Events") is serialised once, here, with sorted keys and compact separators;
those exact bytes are what receivers get and what signatures cover.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from prism.events.catalog import API_VERSION, EVENT_TYPES
from prism.kit.canonical import canonical_json
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import utcnow
from prism.models import OutboxEvent
from prism.webhooks.matching import fan_out

if TYPE_CHECKING:
    from prism.registry.model import HandlerCall

_PREFIX = {e.event_type: e.id_prefix for e in EVENT_TYPES}


class UnknownEventType(ValueError):
    """A programming error: every emitted type must be in the catalog (SPEC.md "Events")."""


def new_event_id(event_type: str) -> str:
    prefix = _PREFIX.get(event_type)
    if prefix is None:
        raise UnknownEventType(event_type)
    return prefix + uuid.uuid4().hex


def timestamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def envelope(event_id: str, event_type: str, moment: datetime, organization_id: str,
             data: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": event_id, "event_type": event_type, "timestamp": timestamp(moment),
        "organization_id": public_organization_id(organization_id), "api_version": API_VERSION, "data": data,
    }


async def emit(session: AsyncSession, *, organization_id: str, tenant_id: str, event_type: str,
               data: dict[str, Any], event_id: str | None = None, fan_out_to_webhooks: bool = True) -> OutboxEvent:
    """Record one event in the caller's transaction and return it (flushed, so it has its row).

    `fan_out_to_webhooks=False` records the event only (a webhook test event names its one receiver itself).
    """
    if event_type not in _PREFIX:
        raise UnknownEventType(event_type)
    event_id = event_id or new_event_id(event_type)
    moment = utcnow()
    payload = canonical_json(envelope(event_id, event_type, moment, organization_id, data)).decode()
    event = OutboxEvent(id=event_id, organization_id=organization_id, tenant_id=tenant_id,
                        event_type=event_type, payload=payload, created_at=moment)
    session.add(event)
    await session.flush()
    # Deliveries are written with the event, in the same transaction: a committed event always has them.
    if fan_out_to_webhooks:
        await fan_out(session, organization_id=organization_id, event_id=event_id, event_type=event_type,
                      data=data, moment=moment)
    return event


async def emit_for(call: HandlerCall, event_type: str, data: dict[str, Any]) -> OutboxEvent:
    """Emit from inside a handler: the event commits (or rolls back) with the handler's own writes."""
    return await emit(call.session, organization_id=call.auth.organization_id, tenant_id=call.auth.tenant_id,
                      event_type=event_type, data=data)
