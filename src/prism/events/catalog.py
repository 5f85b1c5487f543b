"""The registry of event types Prism emits (SPEC.md "Events"); served by entity_crud/core/webhook_event/list."""

from __future__ import annotations

from dataclasses import dataclass

API_VERSION = "2024-12-31"


@dataclass(frozen=True, slots=True)
class EventType:
    event_type: str
    group: str  # governance | platform
    description: str
    id_prefix: str


EVENT_TYPES: tuple[EventType, ...] = (
    EventType("governance.decision.block", "governance",
              "A governance decision blocks an action (policies evaluated and one or more violated).", "dec_"),
    EventType("governance.decision.allow", "governance",
              "A governance decision allows an action (no violations).", "dec_"),
    EventType("governance.violation.detected", "governance",
              "A policy violation is found outside a decision (post-hoc audit, drift alert).", "vio_"),
    EventType("governance.oversight.requested", "governance",
              "A decision is escalated to human oversight.", "ovr_"),
    EventType("document.uploaded", "platform", "A document is uploaded or imported.", "evt_"),
    EventType("document.processed", "platform", "Text extraction and chunking finish.", "evt_"),
    EventType("agent.completed", "platform", "An agent instance retires successfully.", "evt_"),
    EventType("agent.failed", "platform", "An agent instance ends with an error.", "evt_"),
    EventType("mission.started", "platform", "A mission moves from planning to active.", "evt_"),
    EventType("mission.completed", "platform", "A mission is marked completed.", "evt_"),
    EventType("mission.budget_exceeded", "platform",
              "A mission's accumulated cost crosses its budget ceiling.", "evt_"),
    EventType("audit.entry_created", "platform",
              "An entry is appended to the hash-chained governance audit ledger.", "evt_"),
    EventType("audit.checkpoint", "platform",
              "A signed checkpoint (tree head) of an organization's audit ledger, for receivers to keep as proof.",
              "evt_"),
    EventType("claim.submitted", "platform", "An insurance claim is submitted to a payer.", "evt_"),
    EventType("invoice.received", "platform", "A vendor invoice is recorded.", "evt_"),
    EventType("ticket.created", "platform", "An ITSM ticket is created.", "evt_"),
)

EVENT_TYPE_NAMES = frozenset(e.event_type for e in EVENT_TYPES)
GOVERNANCE_EVENT_TYPES = tuple(e.event_type for e in EVENT_TYPES if e.group == "governance")
# The events the people overseeing agents rely on: governance decisions, oversight and violations, the audit
# ledger's entries and checkpoints, missions and their budgets. A webhook carrying one of them is out of reach
# of a governed credential (prism.webhooks.service), or an agent could blind its overseers.
OVERSIGHT_EVENT_TYPES = frozenset(e.event_type for e in EVENT_TYPES
                                  if e.group == "governance" or e.event_type.startswith(("audit.", "mission.")))


def carries_oversight_events(events: list[str]) -> bool:
    """Whether a webhook subscribed to `events` delivers an oversight event; none named means every
    governance event (SPEC.md "Webhook")."""
    return not events or not OVERSIGHT_EVENT_TYPES.isdisjoint(events)
