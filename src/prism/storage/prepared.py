"""Prepared Core statements, run in the session's transaction without SQLAlchemy's execution machinery.

On SQLite a statement by key costs about 1.5 µs in SQLite and 100-200 µs in SQLAlchemy's execution path
(building the statement, its cache key, the execution context, the result) on this project's VM. The statements
on every call's path (a record by id; the ledger batch's head, webhooks, entries and head update) are therefore
built and compiled once per dialect and sent by the driver on the session's own connection (so in its
transaction); each column type's public bind and result processors convert the values, as SQLAlchemy would.

On PostgreSQL they go to asyncpg (`fetch`, `executemany`, its own statement cache) once the session's
transaction is open: SQLAlchemy's asyncpg adapter opens it with the session's first statement, so before that the
session runs the prebuilt statement. A numeric column's result processor depends on the type PostgreSQL answers
with (numeric, float or integer), which SQLAlchemy learns from each execution; here it is read once per
statement from asyncpg's prepared statement (`get_attributes()`); built-in types' OIDs are the same in every
database.

On both engines the driver's errors are raised as SQLAlchemy's (`IntegrityError`, `OperationalError`,
`DBAPIError`), as every caller of a session expects, with the driver's own as their `orig`.
bench/README.md has the measurements.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import asyncpg
from sqlalchemy import Insert, Select, Update, event
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any] | None
# Rows of one executemany of PreparedWrite: about 3 ms of conversion on the event loop here, and more than the
# largest ledger batch (prism.ledger.writer.MAX_BATCH).
SLICE_ROWS = 1_000


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    parameter_names: tuple[str, ...]
    binders: tuple[Processor, ...]
    keys: tuple[str, ...]
    readers: tuple[Processor, ...]
    # Values the statement carries itself (a LIMIT is a parameter), used when `params` has none.
    carried: Mapping[str, Any]

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        return [value if bind is None else bind(value) for value, bind in zip(
            (params[name] if name in params else self.carried[name] for name in self.parameter_names),
            self.binders, strict=True)]


class _Prepared:
    """A statement built once (with bound parameters), compiled once per dialect with its processors."""

    def __init__(self, stmt: Select[Any] | Insert | Update, column_keys: Sequence[str] | None = None) -> None:
        self.stmt = stmt
        self.column_keys = list(column_keys) if column_keys is not None else None
        self._by_dialect: dict[str, _Compiled] = {}

    async def _compiled(self, dialect: Dialect, driver: Any) -> _Compiled:
        hit = self._by_dialect.get(dialect.name)
        if hit is None:
            compiled = self.stmt.compile(dialect=dialect, column_keys=self.column_keys)
            assert isinstance(compiled, SQLCompiler)
            names = tuple(compiled.positiontup or ())
            columns = list(self.stmt.exported_columns)  # a SELECT's columns, or what a write RETURNs
            answered: list[Any] = [None] * len(columns)  # the type each column comes back as, where it matters
            if columns and dialect.name == "postgresql":
                try:
                    described = (await driver.prepare(compiled.string)).get_attributes()
                except _DRIVER_ERRORS as exc:
                    raise _as_sqlalchemy_error(exc, compiled.string, None) from exc
                answered = [attribute.type.oid for attribute in described]
            # The dialect's own implementation of each type, as SQLAlchemy's execution uses.
            hit = self._by_dialect[dialect.name] = _Compiled(
                sql=compiled.string, parameter_names=names,
                binders=tuple(compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
                              for name in names),
                keys=tuple(str(column.key) for column in columns),
                readers=tuple(column.type.dialect_impl(dialect).result_processor(dialect, column_type)
                              for column, column_type in zip(columns, answered, strict=True)),
                carried={name: compiled.binds[name].effective_value for name in names
                         if not compiled.binds[name].required})
        return hit

    @staticmethod
    async def _driver(session: AsyncSession) -> tuple[Dialect, Any]:
        """The session's dialect and driver connection (after flushing pending ORM changes, as an ORM statement
        would); None for the driver connection where the session must run the statement: on PostgreSQL before
        the transaction is open (the session's first statement opens it)."""
        if session.new or session.dirty or session.deleted:
            await session.flush()
        noted = session.info.get(_DRIVER_NOTED)
        if noted is None or session.in_nested_transaction():
            # Asking for the connection begins the session's transaction (which notes its connection), and
            # emits a savepoint SQLAlchemy has only promised so far: a statement that fails must not abort more
            # than its savepoint on PostgreSQL.
            await session.connection()
            noted = session.info[_DRIVER_NOTED]
        dialect, driver = noted
        if dialect.name != "sqlite" and not driver.is_in_transaction():
            driver = None
        return dialect, driver


class PreparedRead(_Prepared):
    """A statement that answers rows, built once and kept: a SELECT, or an INSERT or UPDATE with RETURNING (what it
    wrote, in one round trip); `one` runs it for one row, `all` for every row."""

    def __init__(self, stmt: Select[Any] | Insert | Update) -> None:
        super().__init__(stmt)

    async def one(self, session: AsyncSession, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first row as a dict, or None."""
        rows = await self.all(session, params)
        return rows[0] if rows else None

    async def all(self, session: AsyncSession, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every row, as dicts."""
        dialect, driver = await self._driver(session)
        if driver is None:
            return [dict(row) for row in (await session.execute(self.stmt, dict(params))).mappings()]
        compiled = await self._compiled(dialect, driver)
        arguments = compiled.arguments(params)
        try:
            rows = (await driver.fetch_all(compiled.sql, arguments) if dialect.name == "sqlite" else
                    await driver.fetch(compiled.sql, *arguments))
        except _DRIVER_ERRORS as exc:
            raise _as_sqlalchemy_error(exc, compiled.sql, arguments) from exc
        return [{key: value if read is None else read(value)
                 for key, read, value in zip(compiled.keys, compiled.readers, row, strict=True)} for row in rows]


class PreparedWrite(_Prepared):
    """An INSERT or UPDATE built once; `column_keys` are the columns it sets, named as its parameters."""

    async def run(self, session: AsyncSession, rows: Iterable[Mapping[str, Any]]) -> None:
        """Run it once per row: one executemany for each `SLICE_ROWS` rows, which may be made as they are taken.

        Converting a row's values takes microseconds on the event loop, and an upload writes up to 50,000 rows:
        between slices the loop serves other requests. (A slice's statement itself runs on a thread on SQLite when
        it is long, prism.storage.sqlite_driver, and over the network on PostgreSQL.) A call's ledger batch is
        one slice."""
        taken = iter(rows)
        while batch := list(islice(taken, SLICE_ROWS)):
            await self._run_slice(session, batch)
            if len(batch) == SLICE_ROWS:
                await asyncio.sleep(0)

    async def _run_slice(self, session: AsyncSession, rows: Sequence[Mapping[str, Any]]) -> None:
        dialect, driver = await self._driver(session)
        if driver is None:
            await session.execute(self.stmt, [dict(row) for row in rows])
            return
        compiled = await self._compiled(dialect, driver)
        arguments = [compiled.arguments(row) for row in rows]
        try:
            if dialect.name == "sqlite":
                await driver.execute_many(compiled.sql, arguments)
            else:
                await driver.executemany(compiled.sql, arguments)
        except _DRIVER_ERRORS as exc:
            raise _as_sqlalchemy_error(exc, compiled.sql, arguments) from exc


# The transaction's dialect and driver connection, in `session.info` from the moment the session's transaction is
# on a connection until it ends. Asking the session for them costs two greenlet switches (about 23 µs, five
# times the statement itself on SQLite), and a ledger batch asks once per statement.
_DRIVER_NOTED = "prism.prepared.driver"


@event.listens_for(Session, "after_begin")
def _note_driver(session: Session, _transaction: SessionTransaction, connection: Connection) -> None:
    session.info[_DRIVER_NOTED] = (connection.dialect, connection.connection.driver_connection)


@event.listens_for(Session, "after_transaction_end")
def _forget_driver(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # the session's own transaction, not a savepoint within it
        session.info.pop(_DRIVER_NOTED, None)


# What the drivers raise: SQLite's errors; PostgreSQL's, and asyncpg's for a connection gone or unusable.
_DRIVER_ERRORS = (sqlite3.Error, asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
# SQLSTATE classes: integrity constraint violation; connection exception, transaction rollback (serialization,
# deadlock), insufficient resources, operator intervention.
_INTEGRITY, _OPERATIONAL = ("23",), ("08", "40", "53", "57")


def _as_sqlalchemy_error(exc: BaseException, sql: str, arguments: Any) -> DBAPIError:
    """A driver's error as SQLAlchemy's own execution raises it (a busy SQLite or an unreachable PostgreSQL is then
    answered 503 like any other statement's: prism.storage.errors)."""
    if isinstance(exc, sqlite3.Error):
        kind = (IntegrityError if isinstance(exc, sqlite3.IntegrityError) else
                OperationalError if isinstance(exc, sqlite3.OperationalError) else DBAPIError)
        return kind(sql, arguments, exc, hide_parameters=True)
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = str(exc.sqlstate or "")
        kind = (IntegrityError if sqlstate.startswith(_INTEGRITY) else
                OperationalError if sqlstate.startswith(_OPERATIONAL) else DBAPIError)
        return kind(sql, arguments, exc, hide_parameters=True)
    return OperationalError(sql, arguments, exc, hide_parameters=True, connection_invalidated=True)
