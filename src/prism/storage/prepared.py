"""Prepared Core statements, run in the session's transaction without SQLAlchemy's execution machinery.

On SQLite a statement by key costs about 1.5 µs in SQLite and 100-200 µs in SQLAlchemy's execution path
(building the statement, its cache key, the execution context, the result) on this project's VM. The statements
on every call's path (a record by id; the ledger batch's head, webhooks, entries and head update) are therefore
built and compiled once per dialect and sent by Prism's SQLite driver on the session's own connection (so in its
transaction); each column type's public bind and result processors convert the values, as SQLAlchemy would.
PostgreSQL pays a network round trip either way: there the session runs the prebuilt statement (no construction
each time). bench/README.md has the measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Insert, Select, Update
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any] | None


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

    def _compiled(self, dialect: Dialect) -> _Compiled:
        hit = self._by_dialect.get(dialect.name)
        if hit is None:
            compiled = self.stmt.compile(dialect=dialect, column_keys=self.column_keys)
            assert isinstance(compiled, SQLCompiler)
            names = tuple(compiled.positiontup or ())
            columns = list(self.stmt.selected_columns) if isinstance(self.stmt, Select) else []
            # The dialect's own implementation of each type, as SQLAlchemy's execution uses.
            hit = self._by_dialect[dialect.name] = _Compiled(
                sql=compiled.string, parameter_names=names,
                binders=tuple(compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
                              for name in names),
                keys=tuple(str(column.key) for column in columns),
                readers=tuple(column.type.dialect_impl(dialect).result_processor(dialect, None)
                              for column in columns),
                carried={name: compiled.binds[name].effective_value for name in names
                         if not compiled.binds[name].required})
        return hit

    @staticmethod
    async def _driver(session: AsyncSession) -> tuple[Dialect, Any]:
        """The session's dialect and, on SQLite, its driver connection (after flushing pending ORM changes, as an
        ORM statement would). On PostgreSQL the session runs the statement: asyncpg converts types itself, in ways
        SQLAlchemy's processors only reproduce with what its own execution learns from the statement."""
        if session.new or session.dirty or session.deleted:
            await session.flush()
        connection = await session.connection()
        if connection.dialect.name != "sqlite":
            return connection.dialect, None
        return connection.dialect, (await connection.get_raw_connection()).driver_connection


class PreparedRead(_Prepared):
    """A SELECT built once and kept; `one` runs it for one row, `all` for every row."""

    def __init__(self, stmt: Select[Any]) -> None:
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
        compiled = self._compiled(dialect)
        arguments = compiled.arguments(params)
        rows = await driver.fetch_all(compiled.sql, arguments)
        return [{key: value if read is None else read(value)
                 for key, read, value in zip(compiled.keys, compiled.readers, row, strict=True)} for row in rows]


class PreparedWrite(_Prepared):
    """An INSERT or UPDATE built once; `column_keys` are the columns it sets, named as its parameters."""

    async def run(self, session: AsyncSession, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run it once per row (one executemany)."""
        if not rows:
            return
        dialect, driver = await self._driver(session)
        if driver is None:
            await session.execute(self.stmt, [dict(row) for row in rows])
            return
        compiled = self._compiled(dialect)
        await driver.execute_many(compiled.sql, [compiled.arguments(row) for row in rows])
