"""`audit.checkpoint` after a burst: the last entries of a log that went quiet are attested outside too."""

from __future__ import annotations

import asyncio

import httpx
import orjson
from sqlalchemy import func, select

from prism.app import create_app
from prism.config import Settings
from prism.ledger.checkpoints import parse_checkpoint
from prism.ledger.entries import audit_checkpoints, audit_heads
from prism.models import OutboxEvent
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.webhooks_fixtures import create_hook

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}


async def _log_state(db: Database, ws: Workspace) -> tuple[int, int, list[str]]:
    """(head size, largest kept checkpoint, audit.checkpoint payloads of the organization)."""
    async with db.read() as s:
        size = (await s.execute(select(audit_heads.c.tree_size).where(
            audit_heads.c.organization_id == ws.org.id))).scalar_one()
        kept = (await s.execute(select(func.max(audit_checkpoints.c.tree_size)).where(
            audit_checkpoints.c.organization_id == ws.org.id))).scalar_one()
        sent = list((await s.execute(select(OutboxEvent.payload).where(
            OutboxEvent.organization_id == ws.org.id, OutboxEvent.event_type == "audit.checkpoint")
            .order_by(OutboxEvent.created_at))).scalars())
    return size, kept, sent


async def _checkpointed(db: Database, ws: Workspace) -> tuple[int, int, list[str]]:
    """The log's state once its largest kept checkpoint covers it, or after 8 s (no call meanwhile: it is quiet)."""
    for _ in range(80):
        size, kept, sent = await _log_state(db, ws)
        if kept == size:
            break
        await asyncio.sleep(0.1)
    return size, kept, sent


async def test_a_log_that_went_quiet_has_its_last_entries_checkpointed_and_sent(
        hook_settings: Settings, factory: Factory) -> None:
    """A burst of calls within one checkpoint interval kept (and sent) a checkpoint of its first entry only; with
    no later call, the others were never attested outside the database, so cutting them off would verify against
    every checkpoint a receiver held. Once the interval has passed, the head's checkpoint is kept and sent."""
    settings = hook_settings.model_copy(update={"audit_checkpoint_interval_seconds": 2.0,
                                                "audit_seal_sweep_seconds": 0.1})
    application = create_app(settings)
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    async with application.router.lifespan_context(application), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://localhost") as client:
        db: Database = application.state.db
        await create_hook(client, ws, "https://127.0.0.1:9/checkpoints", events=["audit.checkpoint"])
        for member in (ws, other):
            for _ in range(3):
                assert (await client.post(TOOL, headers=member.headers(), json=LIST)).status_code == 200
        size, kept, sent = await _checkpointed(db, ws)
        assert kept == size == 4
        last = parse_checkpoint(orjson.loads(sent[-1])["data"])
        assert last.tree_size == 4 and last.organization_id == ws.org.id and last.verifies(ledger_keys().public_key)
        # The other organization's log is checkpointed too, but it has no subscriber: nothing is sent for it.
        other_size, other_kept, other_sent = await _checkpointed(db, other)
        assert other_kept == other_size == 3 and other_sent == []
        await asyncio.sleep(1.0)  # kept once: nothing new to attest, nothing more sent
        assert len((await _log_state(db, ws))[2]) == len(sent)
