"""Hot statements without SQLAlchemy's per-call machinery.

SQLAlchemy's async execution path costs ~70 µs (Core) to ~130 µs (ORM) per statement here, against
~4 µs for the same statement on the driver. The dispatcher's hottest statements (a record by id,
the ledger's batch append) therefore compile once per dialect and run directly on the session's own
driver connection — same transaction, same SQL, SQLAlchemy's own bind and result processors (or an
equivalent a statement chooses, see `Prepared`). Everything else uses the session normally.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

from sqlalchemy import Float
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from prism.sqlite_inline import InlineConnection

_DRIVER_KEY = "prism.driver_connection"


class _Compiled:
    """One statement compiled for one dialect; per row, only the values that have a processor are touched."""

    __slots__ = ("_bound", "_processed", "_values_of", "keys", "param_names", "sql")

    def __init__(self, sql: str, param_names: tuple[str, ...],
                 bind_processors: tuple[Callable[[Any], Any] | None, ...], keys: tuple[str, ...],
                 result_processors: tuple[Callable[[Any], Any] | None, ...]) -> None:
        self.sql = sql
        self.param_names = param_names
        self.keys = keys
        self._bound = tuple((i, p) for i, p in enumerate(bind_processors) if p is not None)
        self._processed = tuple((k, p) for k, p in zip(keys, result_processors, strict=True) if p is not None)
        self._values_of = _picker(param_names)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        values = list(self._values_of(params))
        for i, process in self._bound:
            values[i] = process(values[i])
        return values

    def record(self, row: Any) -> dict[str, Any]:
        values = dict(zip(self.keys, row, strict=True))
        for key, process in self._processed:
            values[key] = process(values[key])
        return values


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of `names` in a mapping, in order, picked in C (an itemgetter of one name gives the value
    itself, not a tuple of it)."""
    if len(names) > 1:
        return itemgetter(*names)
    if not names:
        return lambda params: ()
    get = itemgetter(names[0])
    return lambda params: (get(params),)


Processor = Callable[[Any], Any]
# Choosing a value's processor: (selected column or bound parameter, dialect, SQLAlchemy's processor for it)
# -> the processor to use instead (which must give the same values, or what its caller asks for).
ProcessorChoice = Callable[[Any, Dialect, "Processor | None"], "Processor | None"]


class Prepared:
    """A Core statement (SELECT, INSERT, UPDATE) compiled once per dialect.

    `read_column` may replace the processor of a selected column, `bind` that of a parameter.
    """

    def __init__(self, stmt: ClauseElement, *, read_column: ProcessorChoice | None = None,
                 bind: ProcessorChoice | None = None) -> None:
        self.stmt = stmt
        self.read_column = read_column
        self.bind = bind
        self._by_dialect: dict[str, _Compiled] = {}

    def _compiled(self, dialect: Dialect) -> _Compiled:
        hit = self._by_dialect.get(dialect.name)
        if hit is not None:
            return hit
        compiled = self.stmt.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        names = tuple(compiled.positiontup or ())
        columns = list(getattr(self.stmt, "selected_columns", ()))
        readers = [_result_processor(c.type, dialect) for c in columns]
        if self.read_column is not None:
            readers = [self.read_column(c, dialect, r) for c, r in zip(columns, readers, strict=True)]
        binds = [compiled.binds[n] for n in names]
        writers: list[Processor | None] = [b.type._cached_bind_processor(dialect) for b in binds]
        if self.bind is not None:
            writers = [self.bind(b, dialect, w) for b, w in zip(binds, writers, strict=True)]
        hit = self._by_dialect[dialect.name] = _Compiled(
            sql=compiled.string, param_names=names, bind_processors=tuple(writers),
            keys=tuple(c.key for c in columns), result_processors=tuple(readers),
        )
        return hit

    async def fetch_one(self, session: AsyncSession, **params: Any) -> dict[str, Any] | None:
        driver = _current(session) or await _check_out(session)
        compiled = self._compiled(driver.dialect)
        if driver.sqlite is not None:
            row = driver.sqlite.execute(compiled.sql, compiled.args(params)).fetchone()
        else:
            row = await driver.asyncpg.fetchrow(compiled.sql, *compiled.args(params))
        return None if row is None else compiled.record(row)

    async def fetch_all(self, session: AsyncSession, **params: Any) -> list[dict[str, Any]]:
        driver = _current(session) or await _check_out(session)
        compiled = self._compiled(driver.dialect)
        if driver.sqlite is not None:
            rows = driver.sqlite.execute(compiled.sql, compiled.args(params)).fetchall()
        else:
            rows = await driver.asyncpg.fetch(compiled.sql, *compiled.args(params))
        return [compiled.record(row) for row in rows]

    async def execute_many(self, session: AsyncSession, rows: Iterable[Mapping[str, Any]]) -> None:
        compiled = self._compiled(_dialect(session))
        args = [compiled.args(r) for r in rows]
        if not args:
            return
        driver = _current(session) or await _check_out(session)
        if driver.sqlite is not None:
            driver.sqlite.executemany(compiled.sql, args)
        else:
            await driver.asyncpg.executemany(compiled.sql, args)


def _result_processor(type_: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    try:
        processor: Callable[[Any], Any] | None = type_._cached_result_processor(dialect, None)
    except TypeError:
        # PostgreSQL's numeric processors pick a conversion by the column's type OID, which a result
        # usually supplies: give them the OID the declared type is stored as (float8 or numeric).
        processor = type_._cached_result_processor(dialect, _FLOAT8_OID if isinstance(type_, Float) else _NUMERIC_OID)
    return processor


_FLOAT8_OID, _NUMERIC_OID = 701, 1700


def _dialect(session: AsyncSession) -> Dialect:
    bind = session.bind
    assert bind is not None, "prepared statements need a session bound to an engine"
    return bind.dialect


class _Driver:
    """The driver connection under a session's transaction: sqlite3's (under prism.sqlite_inline) or asyncpg's."""

    __slots__ = ("asyncpg", "dialect", "sqlite", "transaction")

    def __init__(self, transaction: Any, dialect: Dialect, connection: Any) -> None:
        self.transaction = transaction
        self.dialect = dialect
        self.sqlite: sqlite3.Connection | None = None
        self.asyncpg: Any = None
        if isinstance(connection, InlineConnection):
            self.sqlite = connection.sqlite
        else:
            self.asyncpg = connection


def _current(session: AsyncSession) -> _Driver | None:
    """The cached driver of the session's current transaction, if it has one and nothing waits to be flushed."""
    sync = session.sync_session
    # What `session.new or session.dirty or session.deleted` says, without building three sets per statement.
    if not sync._is_clean():
        return None
    driver: _Driver | None = sync.info.get(_DRIVER_KEY)
    if driver is not None and driver.transaction is sync.get_transaction():
        return driver
    return None


async def _check_out(session: AsyncSession) -> _Driver:
    """The driver under the session's transaction (beginning it if need be), cached for that transaction."""
    sync = session.sync_session
    if not sync._is_clean():
        await session.flush()  # what the ORM would do before a query (autoflush)
        driver = _current(session)
        if driver is not None:
            return driver
    connection, adapter, dialect = await session.run_sync(_connection_of)  # one greenlet round trip, not two
    if dialect.name == "postgresql":
        # SQLAlchemy's asyncpg adapter sends BEGIN lazily, with its first statement; without this, statements
        # sent straight to the driver run in autocommit (FOR UPDATE would lock nothing, appends not atomic).
        await _begin_postgresql(adapter)
    driver = sync.info[_DRIVER_KEY] = _Driver(sync.get_transaction(), dialect, connection)
    return driver


def _connection_of(sync: Session) -> tuple[Any, Any, Dialect]:
    """(driver connection, SQLAlchemy's DBAPI adapter, dialect) of the session's transaction."""
    connection = sync.connection()
    raw = connection.connection
    adapter = raw.dbapi_connection
    if connection.dialect.name == "postgresql" and not _begins_directly(adapter):
        connection.exec_driver_sql("SELECT 1")  # another SQLAlchemy release: the portable way
    return raw.driver_connection, adapter, connection.dialect


def _begins_directly(adapter: Any) -> bool:
    return getattr(adapter, "_start_transaction", None) is not None and hasattr(adapter, "_transaction")


async def _begin_postgresql(adapter: Any) -> None:
    """Start the adapter's transaction now: BEGIN alone, rather than BEGIN plus a throwaway SELECT."""
    if _begins_directly(adapter) and adapter._transaction is None:
        await adapter._start_transaction()
