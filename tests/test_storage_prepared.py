"""Prepared statements (prism.storage.prepared) give what SQLAlchemy's own execution gives, on both engines; on
SQLite the driver runs them, on PostgreSQL the session."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.ledger.entries import WRITTEN_COLUMNS, audit_entries
from prism.storage import Database
from prism.storage.prepared import PreparedRead, PreparedWrite
from tests.factories import Factory

COLUMNS = WRITTEN_COLUMNS
INSERT = PreparedWrite(insert(audit_entries), column_keys=COLUMNS)
BY_DIGEST = PreparedRead(select(*(audit_entries.c[name] for name in COLUMNS))
                         .where(audit_entries.c.arguments_digest == bindparam("digest"))
                         .order_by(audit_entries.c.id).limit(5))


def _entry(organization_id: str, tenant_id: str, digest: str, i: int) -> dict[str, Any]:
    return {"organization_id": organization_id, "tenant_id": tenant_id,
            "created_at": datetime(2026, 11, 24, 12, 0, i, 123456, tzinfo=UTC), "actor_user_id": None,
            "credential_id": None, "door": "rest", "tool_name": "prism_probe", "coordinate": "probe/x/y/z",
            "arguments_digest": digest, "outcome": "refused", "error_code": "nope",
            "detail": {"n": i, "nested": {"list": [1, "two", None]}, "text": "é\u2028"},
            "entry_hash": f"{i:064x}", "seq": None, "mac": None}


class SessionCalls(list[str]):
    """Statements the session ran itself in the test's task, from its last `clear()` (the rest went through the
    driver). Other tasks of the shared app (the integrations watcher) may run statements meanwhile: not these."""

    task: asyncio.Task[Any] | None = None

    def clear(self) -> None:
        super().clear()
        self.task = asyncio.current_task()


@pytest.fixture
def driver_calls(monkeypatch: pytest.MonkeyPatch) -> SessionCalls:
    through_session = SessionCalls()
    execute = AsyncSession.execute

    async def counted(self: AsyncSession, statement: Any, *args: Any, **kwargs: Any) -> Any:
        if asyncio.current_task() is through_session.task:
            through_session.append(type(statement).__name__)
        return await execute(self, statement, *args, **kwargs)

    monkeypatch.setattr(AsyncSession, "execute", counted)
    return through_session


async def test_prepared_writes_and_reads_round_trip_like_sqlalchemy(db: Database, factory: Factory,
                                                                     driver_calls: SessionCalls) -> None:
    ws = await factory.workspace(roles=("owner",))
    digest = f"prepared-{ws.org.id}"
    rows = [_entry(ws.org.id, ws.tenant.id, digest, i) for i in range(3)]
    driver_calls.clear()
    async with db.write() as session:
        await session.execute(select(1))
        await INSERT.run(session, rows)
        prepared = await BY_DIGEST.all(session, {"digest": digest})
    assert driver_calls == (["Select"] if db.is_sqlite else ["Select", "Insert", "Select"])
    async with db.read() as session:
        stored = [dict(row) for row in (await session.execute(
            select(*(audit_entries.c[name] for name in COLUMNS)).where(audit_entries.c.arguments_digest == digest)
            .order_by(audit_entries.c.id))).mappings()]
    assert prepared == stored == rows


async def test_a_prepared_read_finds_nothing_as_an_empty_list(db: Database, factory: Factory,
                                                             driver_calls: SessionCalls) -> None:
    ws = await factory.workspace(roles=("owner",))
    driver_calls.clear()
    async with db.write() as session:
        assert await BY_DIGEST.all(session, {"digest": f"none-{ws.org.id}"}) == []
        assert await BY_DIGEST.one(session, {"digest": f"none-{ws.org.id}"}) is None
    assert driver_calls == ([] if db.is_sqlite else ["Select", "Select"])
