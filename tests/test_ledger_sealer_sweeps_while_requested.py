"""A sealer whose batches keep requesting seals still sweeps every `sweep_every`: it seals what other processes left
waiting (on PostgreSQL a process that stopped between a call's commit and its seal), however busy it is."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from prism.ledger.entries import audit_entries
from prism.ledger.sealer import Sealer
from prism.storage import Database
from tests.factories import Factory, ledger_keys
from tests.ledger_support import sealed_log, write_waiting


async def _position(db: Database, entry_id: int) -> int | None:
    async with db.read() as s:
        seq: int | None = (await s.execute(select(audit_entries.c.seq).where(audit_entries.c.id == entry_id))).scalar()
    return seq


async def test_a_sealer_requested_every_10_ms_still_sweeps(client, factory: Factory, db: Database) -> None:
    hot = await sealed_log(client, factory, db, calls=1)
    quiet = await factory.workspace(roles=("owner",))
    sealer = Sealer(db, ledger_keys(), checkpoint_every=60, sweep_every=0.2)
    sealer.start()
    try:
        await asyncio.sleep(0.05)  # its first sweep is over: what is written next, only a later sweep finds
        left = await write_waiting(db, quiet)  # as by a process that stopped before sealing it
        for _ in range(150):  # 1.5 s of batches of the hot log requesting seals, more often than sweep_every
            sealer.request([hot.org.id])
            await asyncio.sleep(0.01)
            if await _position(db, left) is not None:
                break
    finally:
        await sealer.close()
    assert await _position(db, left) == 1, "the entry left waiting was not swept while seals were requested"
    # Only the quiet organization's entry was swept into its log; the hot log kept its one entry.
    async with db.read() as s:
        hot_positions = (await s.execute(select(audit_entries.c.seq).where(
            audit_entries.c.organization_id == hot.org.id))).scalars().all()
    assert hot_positions == [1]
