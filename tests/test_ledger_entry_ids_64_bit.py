"""Entry ids come from one sequence for the whole deployment: past 2^31 - 1 entries calls are still audited, and
their entries verify (PostgreSQL; SQLite's integers are 64-bit whatever the declared type)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select, text

from prism.ledger.entries import audit_entries
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok
from tests.ledger_support import verified

PARTS = "/prism/entity_crud/spare_parts/spare_part/list"
INT4_MAX = 2**31 - 1


async def test_calls_past_2_31_entries_are_audited_and_verify(client: httpx.AsyncClient, factory: Factory,
                                                              db: Database) -> None:
    if db.is_sqlite:
        pytest.skip("PostgreSQL only: SQLite stores every integer in 64 bits")
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    assert (await client.post(PARTS, json={}, headers=ws.headers())).status_code == 200
    async with db.write() as s:  # as after 2^31 - 1 calls across the deployment
        await s.execute(text(f"SELECT setval(pg_get_serial_sequence('audit_entries', 'id'), {INT4_MAX})"))
    for workspace in (ws, other):
        answer = await client.post(PARTS, json={}, headers=workspace.headers())
        assert answer.status_code == 200, answer.text
    async with db.read() as s:
        ids = (await s.execute(select(audit_entries.c.id).where(
            audit_entries.c.organization_id.in_([ws.org.id, other.org.id])).order_by(audit_entries.c.id))).scalars()
        assert [i > INT4_MAX for i in ids] == [False, True, True]
    for workspace, size in ((ws, 2), (other, 1)):
        report = await verified(db, workspace.org.id)
        assert report.valid and report.tree_size == size, report
        listed = await ok(client, workspace, "audit_query/ledger/entry/list", {"page_size": 10})
        assert len(listed["items"]) == size  # each log holds its own entries only
    # Every column holding an entry's id or position is 64-bit (violations found after the fact name both).
    async with db.read() as s:
        types = dict((await s.execute(text(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns WHERE "
            "(table_name = 'audit_entries' AND column_name = 'id') OR (table_name = 'governance_violations' "
            "AND column_name IN ('audit_entry_id', 'audit_seq'))"))).all())
    assert types == {"audit_entries.id": "bigint", "governance_violations.audit_entry_id": "bigint",
                     "governance_violations.audit_seq": "bigint"}
