"""`audit.entry_created` events, only for organizations that subscribe to them.

The ledger appends an entry on every dispatch. Recording an outbox event per entry for everyone would
double the ledger's writes for an event almost nobody wants, so the ledger batch asks once (one indexed
query, shared with the batch's other events through the transaction's webhook cache) which of its
organizations have an active webhook listing `audit.entry_created`, and emits for those only. A webhook
created later receives entries appended from then on.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from prism.events.outbox import emit
from prism.webhooks.matching import subscribed_organizations

EVENT_TYPE = "audit.entry_created"


async def announce_entries(session: AsyncSession, entries: list[dict[str, Any]]) -> None:
    if not entries:
        return
    wanted = await subscribed_organizations(session, {e["organization_id"] for e in entries}, EVENT_TYPE)
    for entry in entries:
        if entry["organization_id"] in wanted:
            await emit(session, organization_id=entry["organization_id"], tenant_id=entry["tenant_id"],
                       event_type=EVENT_TYPE, data={
                           "seq": entry["seq"], "hash": entry["hash"], "coordinate": entry["coordinate"],
                           "outcome": entry["outcome"], "actor": entry["actor_user_id"], "door": entry["door"]})
