"""Reading the audit ledger in tests: seal what is waiting first, as a running server does within milliseconds.

On SQLite an entry is sealed when its call answers; on PostgreSQL the server's sealer gives it its position just
after the call's commit, so a test that reads positions seals the organization's backlog itself first.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import insert

from prism.kit.timeutil import utcnow
from prism.ledger.entries import EntryDraft, audit_entries, content_hash, content_of
from prism.ledger.sealer import seal_all
from prism.ledger.verify import LogReport, verify_log
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


async def write_waiting(db: Database, ws: Workspace, *, entry_hash: str | None = None) -> int:
    """One entry as the ledger writer leaves it waiting (content hash, MAC at position 0), its hash optionally
    rewritten afterwards; its id."""
    at = utcnow() - timedelta(seconds=1)
    draft = EntryDraft(ws.org.id, ws.tenant.id, at, None, None, "rest", "prism_entity_crud",
                       "entity_crud/spare_parts/spare_part/list", "0" * 64, "allowed", None, {"status": 200})
    digest = content_hash(content_of(draft))
    async with db.write() as s:
        result = await s.execute(insert(audit_entries).values(
            **{**content_of(draft), "created_at": at}, entry_hash=entry_hash or digest,
            mac=ledger_keys().mac(ws.org.id, 0, digest)))
        return int(result.inserted_primary_key[0])
