"""`log/verify` reads and hashes the log after its call's batch committed, in a read transaction of its own: run in
the batch's transaction, a viewer's verification held every call of the batch, and on SQLite the write lock, so
every other tenant's call of the process waited for it (11 s at 100,000 entries)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import insert

from prism.kit.timeutil import utcnow
from prism.ledger.entries import EntryDraft, audit_entries, content_hash, content_of
from prism.ledger.sealer import head_of, seal_written
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.governance_support import ok, post

ENTRIES = 30_000
VERIFY = "audit_query/ledger/log/verify"
PARTS = "/prism/entity_crud/spare_parts/spare_part/list"


async def _sealed_entries(db: Database, ws: Workspace, count: int) -> None:
    """`count` sealed entries, written as the ledger writes them, without a call each."""
    keys, at = ledger_keys(), utcnow() - timedelta(days=1)
    for first in range(0, count, 10_000):
        rows: list[dict[str, Any]] = []
        for number in range(first, min(first + 10_000, count)):
            draft = EntryDraft(ws.org.id, ws.tenant.id, at, None, None, "rest", "prism_entity_crud",
                               "entity_crud/spare_parts/spare_part/list", "0" * 64, "allowed", None,
                               {"status": 200, "nonce": f"{number:x}"})
            row = content_of(draft)
            rows.append({**row, "created_at": at, "entry_hash": content_hash(row), "seq": None, "mac": None})
        async with db.write() as session:
            await seal_written(session, ws.org.id, keys, rows, head=await head_of(session, ws.org.id),
                               checkpoint_every=10**9)
            await session.execute(insert(audit_entries), rows)


async def test_another_tenants_calls_run_while_a_long_log_is_verified(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    big, other = await factory.workspace(roles=("viewer",)), await factory.workspace(roles=("owner",))
    await _sealed_entries(db, big, ENTRIES)
    finished: dict[str, float] = {}

    async def verify() -> httpx.Response:
        answer = await post(client, big, VERIFY, {"start": "first_entry"}, label="viewer")
        finished["verify"] = time.perf_counter()
        return answer

    verifying = asyncio.create_task(verify())
    await asyncio.sleep(0.2)  # the verification's call is under way
    assert (await client.post(PARTS, json={}, headers=other.headers())).status_code == 200
    finished["other"] = time.perf_counter()
    verified = await verifying
    assert verified.status_code == 200, verified.text
    report = verified.json()["data"]
    assert report["valid"] is True and report["checked"] >= ENTRIES, report
    assert finished["other"] < finished["verify"], "another tenant's call waited for the verification"
    # Its own log, verified by its owner, is its own.
    mine = await ok(client, other, VERIFY, {"start": "first_entry"})
    assert mine["valid"] is True and mine["checked"] < ENTRIES, mine
