"""Prepared statements (prism.storage.prepared) give what SQLAlchemy's own execution gives, on both engines: the
same values (numbers of every kind included) and the same errors. The driver runs them in the session's
transaction; on PostgreSQL, before the session's first statement opens it, the session runs them."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import BigInteger, Float, Numeric, bindparam, cast, func, insert, literal, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.idempotency.models import IdempotencyRecord
from prism.ledger.entries import WRITTEN_COLUMNS, audit_entries
from prism.storage import Database, unavailable_error
from prism.storage.prepared import SLICE_ROWS, PreparedRead, PreparedWrite
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
    assert driver_calls == ["Select"]  # the rest went through the driver
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
    # On PostgreSQL the session's first statement opens its transaction, so the session runs that one.
    assert driver_calls == ([] if db.is_sqlite else ["Select"])


A_FLOAT, A_DECIMAL = bindparam("a_float", type_=Float()), bindparam("a_decimal", type_=Numeric(10, 2))
NUMBERS = PreparedRead(select(
    cast(A_FLOAT, Float).label("a_float"), cast(A_DECIMAL, Numeric(10, 2)).label("a_decimal"),
    cast(A_DECIMAL, Numeric(10, 2, asdecimal=False)).label("decimal_as_float"),
    cast(A_FLOAT, Float(asdecimal=True)).label("float_as_decimal"),
    cast(bindparam("a_big", type_=BigInteger()), BigInteger).label("a_big"), literal(7).label("an_int")))


async def test_numbers_of_every_kind_read_as_sqlalchemy_reads_them(db: Database) -> None:
    params = {"a_float": 1.5, "a_decimal": Decimal("2.25"), "a_big": 2**40}
    async with db.read() as session:
        expected = dict((await session.execute(NUMBERS.stmt, params)).mappings().one())
        prepared = await NUMBERS.one(session, params)  # after the first statement: the driver runs it
    assert prepared == expected == {"a_float": 1.5, "a_decimal": Decimal("2.25"), "decimal_as_float": 2.25,
                                    "float_as_decimal": Decimal("1.5"), "a_big": 2**40, "an_int": 7}
    assert prepared is not None
    assert [type(prepared[key]) for key in expected] == [type(value) for value in expected.values()]


async def test_a_driver_error_is_raised_as_sqlalchemys(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    orphan = _entry("org-that-does-not-exist", ws.tenant.id, f"orphan-{ws.org.id}", 0)
    with pytest.raises(IntegrityError) as raised:  # the entry's organization must exist
        async with db.write() as session:
            await session.execute(select(1))
            await INSERT.run(session, [orphan])
    assert unavailable_error(raised.value) is None  # a constraint, not "try again"
    async with db.read() as session:
        assert await BY_DIGEST.all(session, {"digest": orphan["arguments_digest"]}) == []


async def test_a_session_reused_for_another_transaction_runs_on_that_transactions_connection(db: Database) -> None:
    # The driver connection is noted when a transaction begins and forgotten when it ends: a session that goes on
    # to another transaction (on another connection: the first one is thrown away here) never reaches back.
    digest = {"digest": "reused-session"}
    async with db.sessions() as session:
        await session.begin()
        await session.execute(select(1))
        assert await BY_DIGEST.all(session, digest) == []
        await (await session.connection()).invalidate()
        await session.rollback()
        assert await BY_DIGEST.all(session, digest) == []  # the session's next transaction begins here
        await session.rollback()


async def test_a_savepoint_keeps_the_transactions_connection(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    digest = f"savepoint-{ws.org.id}"
    async with db.write() as session:
        await session.execute(select(1))
        await INSERT.run(session, [_entry(ws.org.id, ws.tenant.id, digest, 0)])
        with pytest.raises(IntegrityError):
            async with session.begin_nested():
                await INSERT.run(session, [_entry("org-that-does-not-exist", ws.tenant.id, digest, 1)])
        await INSERT.run(session, [_entry(ws.org.id, ws.tenant.id, digest, 2)])
        assert [row["detail"]["n"] for row in await BY_DIGEST.all(session, {"digest": digest})] == [0, 2]
    async with db.read() as session:
        assert [row["detail"]["n"] for row in await BY_DIGEST.all(session, {"digest": digest})] == [0, 2]


def _claim(dialect: Any) -> PreparedRead:
    keys = IdempotencyRecord.__table__
    return PreparedRead(dialect.insert(keys).values(
        {name: bindparam(name) for name in ("id", "fingerprint", "created_at", "expires_at")})
        .on_conflict_do_nothing(index_elements=["id"]).returning(keys.c.id, keys.c.expires_at))


CLAIMS = {"postgresql": _claim(postgresql), "sqlite": _claim(sqlite)}


async def test_a_prepared_write_with_returning_answers_what_it_wrote_and_nothing_when_it_wrote_nothing(
        db: Database) -> None:
    claim = CLAIMS["sqlite" if db.is_sqlite else "postgresql"]
    record_id = uuid.uuid4().hex
    at = datetime(2026, 11, 29, 12, 0, 0, 250000, tzinfo=UTC)
    row = {"id": record_id, "fingerprint": "f" * 64, "created_at": at, "expires_at": at}
    async with db.write() as session:
        await session.execute(select(literal(1)))  # the transaction is open: the driver runs the insert
        assert await claim.all(session, row) == [{"id": record_id, "expires_at": at}]
        assert await claim.all(session, row) == []  # the row exists: ON CONFLICT DO NOTHING returns no row
    async with db.read() as session:
        stored = (await session.execute(select(IdempotencyRecord.fingerprint)
                                        .where(IdempotencyRecord.id == record_id))).scalar_one()
    assert stored == "f" * 64


async def test_a_prepared_write_of_many_rows_writes_them_all_in_slices_with_the_loop_served_between(
        db: Database, factory: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = await factory.workspace(roles=("owner",))
    digest = f"sliced-{ws.org.id}"
    count = 2 * SLICE_ROWS + 345
    turns = 0  # the loop's turns for other tasks while the rows are written

    async def other_task() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    sizes: list[int] = []
    run_slice = PreparedWrite._run_slice

    async def counted(self: PreparedWrite, session: AsyncSession, rows: Any) -> None:
        sizes.append(len(rows))
        await run_slice(self, session, rows)

    monkeypatch.setattr(PreparedWrite, "_run_slice", counted)
    async with db.write() as session:
        await session.execute(select(1))
        other = asyncio.create_task(other_task())
        await asyncio.sleep(0)
        before = turns
        # rows made as they are taken
        await INSERT.run(session, (_entry(ws.org.id, ws.tenant.id, digest, i % 60) for i in range(count)))
        served = turns - before
        other.cancel()
    assert sizes == [SLICE_ROWS, SLICE_ROWS, 345]
    assert served >= 2  # at least once after each full slice
    async with db.read() as session:
        written = (await session.execute(select(func.count()).select_from(audit_entries)
                                         .where(audit_entries.c.arguments_digest == digest))).scalar_one()
    assert written == count
