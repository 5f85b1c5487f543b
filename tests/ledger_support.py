"""Reading the audit ledger in tests: seal what is waiting first, as a running server does within milliseconds.

On SQLite an entry is sealed when its call answers; on PostgreSQL the server's sealer gives it its position just
after the call's commit, so a test that reads positions seals the organization's backlog itself first.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.kit.timeutil import utcnow
from prism.ledger.entries import EntryDraft, audit_entries, content_hash, content_of
from prism.ledger.sealer import seal_all
from prism.ledger.verify import LogReport, verify_log
from prism.ledger.writer import reserve_entry_ids
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys


async def seal_waiting(db: Database, organization_id: str) -> None:
    await seal_all(db, [organization_id], ledger_keys(), checkpoint_every=60.0)


async def verified(db: Database, organization_id: str) -> LogReport:
    """The organization's log, sealed and verified from its first entry."""
    await seal_waiting(db, organization_id)
    async with db.read() as session:
        return await verify_log(session, organization_id, ledger_keys())


async def sealed_log(client: httpx.AsyncClient, factory: Factory, db: Database, calls: int = 4) -> Workspace:
    """A workspace whose log holds `calls` sealed entries (reads of its spare parts)."""
    ws = await factory.workspace(roles=("owner",))
    for _ in range(calls):
        answer = await client.post("/prism/entity_crud/spare_parts/spare_part/list", json={}, headers=ws.headers())
        assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)
    return ws


async def insert_waiting(session: AsyncSession, rows: list[dict[str, Any]]) -> list[int]:
    """Insert entries as the ledger writer leaves them waiting: each with a reserved id and the MAC of its content
    hash and that id (rows: content, created_at and entry_hash); their ids."""
    keys = ledger_keys()
    ids = await reserve_entry_ids(session, len(rows))
    await session.execute(insert(audit_entries), [
        {**row, "id": entry_id, "mac": keys.waiting_mac(row["organization_id"], entry_id, row["entry_hash"])}
        for row, entry_id in zip(rows, ids, strict=True)])
    return ids


async def write_waiting(db: Database, ws: Workspace, *, entry_hash: str | None = None) -> int:
    """One entry as the ledger writer leaves it waiting (content hash, MAC of it and its id), its hash optionally
    rewritten afterwards; its id."""
    at = utcnow() - timedelta(seconds=1)
    draft = EntryDraft(ws.org.id, ws.tenant.id, at, None, None, "rest", "prism_entity_crud",
                       "entity_crud/spare_parts/spare_part/list", "0" * 64, "allowed", None, {"status": 200})
    digest = content_hash(content_of(draft))
    async with db.write() as s:
        [entry_id] = await insert_waiting(s, [{**content_of(draft), "created_at": at, "entry_hash": digest}])
        if entry_hash is not None:
            await s.execute(update(audit_entries).where(audit_entries.c.id == entry_id).values(entry_hash=entry_hash))
        return entry_id
