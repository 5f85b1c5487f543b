"""The event outbox: events commit with the change that caused them, in the envelope of SPEC.md."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import select

from prism.events.outbox import UnknownEventType, emit
from prism.models import OutboxEvent
from prism.storage import Database
from tests.factories import Factory


async def test_an_emitted_event_is_stored_as_the_exact_envelope_of_the_contract(db: Database,
                                                                                  factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as session:
        event = await emit(session, organization_id=ws.org.id, tenant_id=ws.tenant.id,
                           event_type="invoice.received", data={"invoice_id": "inv-1", "amount": "12.50"})
    async with db.read() as session:
        stored = (await session.execute(select(OutboxEvent).where(OutboxEvent.id == event.id))).scalar_one()
    body = json.loads(stored.payload)
    assert body == {
        "event_id": event.id, "event_type": "invoice.received", "timestamp": body["timestamp"],
        "organization_id": "org_" + uuid.UUID(ws.org.id).hex, "api_version": "2024-12-31",
        "data": {"invoice_id": "inv-1", "amount": "12.50"},
    }
    assert event.id.startswith("evt_") and body["timestamp"].endswith("Z")
    # Sorted keys, no whitespace: the bytes a signature will cover.
    assert stored.payload == json.dumps(body, sort_keys=True, separators=(",", ":"))


async def test_governance_events_carry_the_prefix_of_their_kind(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with db.write() as session:
        ids = [(await emit(session, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type=t,
                           data={})).id
               for t in ("governance.decision.block", "governance.violation.detected",
                         "governance.oversight.requested")]
    assert [i[:4] for i in ids] == ["dec_", "vio_", "ovr_"]


async def test_an_event_rolls_back_with_the_change_that_caused_it(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with db.write() as session:
            event = await emit(session, organization_id=ws.org.id, tenant_id=ws.tenant.id,
                               event_type="ticket.created", data={})
            raise Boom
    async with db.read() as session:
        assert (await session.execute(select(OutboxEvent).where(OutboxEvent.id == event.id))).first() is None


async def test_an_event_type_outside_the_catalog_is_refused(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    with pytest.raises(UnknownEventType):
        async with db.write() as session:
            await emit(session, organization_id=ws.org.id, tenant_id=ws.tenant.id, event_type="made.up", data={})
