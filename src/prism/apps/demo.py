"""Demo records of the business apps, seeded with the demo tenant (prism.seed) so it shows the domain."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.agents.models import Agent, AgentInstance, AgentStep
from prism.apps.claims.models import Claim, ClaimLine, Patient, Payer
from prism.apps.documents.index import index_text, store_chunks
from prism.apps.documents.models import Collection, Document
from prism.apps.itsm.models import Service, SlaPolicy, Ticket, TicketCounter
from prism.apps.maintenance.models import Asset, MaintenancePlan, WorkOrder
from prism.apps.notifications.models import Channel, Notification
from prism.models import Organization, User

MANUAL = """# Feed pump P-100 — operating manual

Prime the casing with water before starting. Never run the pump dry: the mechanical seal overheats
within seconds.

Replace the mechanical seal every 8000 operating hours, or when leakage exceeds ten drops per minute.
Grease the motor bearings every 30 days with lithium grease.

If vibration exceeds 7 mm/s, stop the pump and check the coupling alignment."""

# (number, procedure code, units, unit price in cents, final status)
CLAIMS = [("CLM-1001", "99213", 1, 12_500, "draft"), ("CLM-1002", "73030", 2, 8_900, "submitted"),
          ("CLM-1003", "99214", 1, 18_000, "paid"), ("CLM-1004", "97110", 4, 4_500, "denied")]


async def seed_domain(session: AsyncSession, org: Organization, user: User) -> None:
    now = datetime.now(UTC)
    today = now.date()

    def add(*rows: object) -> None:
        session.add_all(rows)

    payer = Payer(organization_id=org.id, code="BCX", name="Blue Cross Example", contact_email="claims@bcx.example")
    patient = Patient(organization_id=org.id, member_id="M-100200", name="Jordan Rivera")
    add(payer, patient)
    await session.flush()
    patient.payer_id = payer.id
    for number, code, units, price, status in CLAIMS:
        billed = units * price
        claim = Claim(organization_id=org.id, number=number, payer_id=payer.id, patient_id=patient.id,
                      service_date=today - timedelta(days=20), billed_cents=billed, status=status,
                      submitted_at=None if status == "draft" else now - timedelta(days=10),
                      approved_cents=billed if status == "paid" else 0, paid_cents=billed if status == "paid" else 0,
                      denial_reason="Not medically necessary" if status == "denied" else "")
        add(claim)
        await session.flush()
        add(ClaimLine(organization_id=org.id, claim_id=claim.id, procedure_code=code, quantity=units,
                      unit_price_cents=price, amount_cents=billed))

    pump = Asset(organization_id=org.id, tag="PMP-100", name="Feed pump P-100", category="pump",
                 location="Boiler house", criticality="high")
    conveyor = Asset(organization_id=org.id, tag="CNV-200", name="Packing conveyor", category="conveyor",
                     location="Hall B", status="down")
    add(pump, conveyor)
    await session.flush()
    add(WorkOrder(organization_id=org.id, asset_id=conveyor.id, title="Belt slipping under load", priority="urgent",
                  status="in_progress", started_at=now - timedelta(hours=3), due_date=today))
    add(WorkOrder(organization_id=org.id, asset_id=pump.id, title="Seal leaking 12 drops/min", priority="high",
                  due_date=today + timedelta(days=2)))
    add(MaintenancePlan(organization_id=org.id, asset_id=pump.id, title="Grease motor bearings", interval_days=30,
                        next_due=today + timedelta(days=5)))

    add(SlaPolicy(organization_id=org.id, priority="p1", resolve_hours=4))
    add(SlaPolicy(organization_id=org.id, priority="p2", resolve_hours=8))
    vpn = Service(organization_id=org.id, name="VPN", owner_email=user.email, tier="critical")
    add(vpn)
    await session.flush()
    add(Ticket(organization_id=org.id, number=1, title="VPN drops every 10 minutes", priority="p2", service_id=vpn.id,
               requester_email=user.email, sla_due_at=now + timedelta(hours=8)))
    add(Ticket(organization_id=org.id, number=2, title="New hire laptop", kind="request", priority="p4",
               status="resolved", requester_email=user.email, resolution="Laptop handed over", resolved_at=now))
    add(TicketCounter(organization_id=org.id, last_number=2))  # the next ticket is #3, even once these are deleted

    manuals = Collection(organization_id=org.id, name="Plant manuals")
    add(manuals)
    await session.flush()
    index = index_text(MANUAL, "text/markdown", chunk_words=40, overlap_words=10)
    document = Document(organization_id=org.id, collection_id=manuals.id, title="Feed pump P-100 manual",
                        content_type="text/markdown", content=MANUAL, size_bytes=len(MANUAL.encode()),
                        sha256=hashlib.sha256(MANUAL.encode()).hexdigest(), status="processed",
                        word_count=index.word_count, chunk_count=len(index.chunks), processed_at=now)
    add(document)
    await session.flush()
    await store_chunks(session, organization_id=org.id, document_id=document.id, collection_id=manuals.id,
                       index=index)

    clerk = Agent(organization_id=org.id, name="AP clerk", model="small-1", max_steps=20,
                  description="Matches vendor invoices to goods receipts and flags mismatches.")
    add(clerk)
    await session.flush()
    run = AgentInstance(organization_id=org.id, agent_id=clerk.id, task="Match this week's invoices",
                        status="completed", step_count=1, result="6 invoices matched, 1 flagged",
                        spawned_by=user.email, started_at=now - timedelta(minutes=4), ended_at=now)
    add(run)
    await session.flush()
    add(AgentStep(organization_id=org.id, instance_id=run.id, seq=1, kind="tool_call",
                  content="entity_crud/finance/invoice/list {status: received}"))

    alerts = Channel(organization_id=org.id, name="#maintenance-alerts", kind="chat")
    add(alerts)
    await session.flush()
    add(Notification(organization_id=org.id, channel_id=alerts.id, subject="Conveyor CNV-200 is down",
                     priority="urgent", sender_user_id=user.id))
    add(Notification(organization_id=org.id, recipient_user_id=user.id, recipient_email=user.email,
                     subject="Invoice HS-5521 is overdue", body="75 days since issue.", priority="high",
                     sender_user_id=user.id))
    await session.flush()
