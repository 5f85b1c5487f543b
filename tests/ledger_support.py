"""Reading the audit ledger in tests: seal what is waiting first, as a running server does within milliseconds.

On SQLite an entry is sealed when its call answers; on PostgreSQL the server's sealer gives it its position just
after the call's commit, so a test that reads positions seals the organization's backlog itself first.
"""

from __future__ import annotations

import httpx

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
