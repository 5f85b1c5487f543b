"""Prepared Core statements, run in the session's transaction without SQLAlchemy's execution machinery.

On SQLite a statement by key costs about 1.5 µs in SQLite and 100-200 µs in SQLAlchemy's execution path
(building the statement, its cache key, the execution context, the result) on this project's VM. The statements
on every call's path (a record by id; the ledger batch's head, webhooks, entries and head update) are therefore
built and compiled once per dialect and sent by Prism's SQLite driver on the session's own connection (so in its
transaction); each column type's public bind and result processors convert the values, as SQLAlchemy would.
PostgreSQL pays a network round trip either way: there the session runs the statement. bench/README.md has the
measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Insert, Select, Update
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    parameter_names: tuple[str, ...]
    binders: tuple[Processor, ...]
    keys: tuple[str, ...]
    readers: tuple[Processor, ...]

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        return [value if bind is None else bind(value) for value, bind in
                zip((params[name] for name in self.parameter_names), self.binders, strict=True)]


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
            hit = self._by_dialect[dialect.name] = _Compiled(
                sql=compiled.string, parameter_names=names,
                binders=tuple(compiled.binds[name].type.bind_processor(dialect) for name in names),
                keys=tuple(str(column.key) for column in columns),
                readers=tuple(column.type.result_processor(dialect, None) for column in columns))
        return hit

    @staticmethod
    async def _connection(session: AsyncSession) -> AsyncConnection:
        """The session's connection, after flushing pending ORM changes, as an ORM statement would."""
        if session.new or session.dirty or session.deleted:
            await session.flush()
        return await session.connection()


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
        connection = await self._connection(session)
        if connection.dialect.name != "sqlite":
            return [dict(row) for row in (await session.execute(self.stmt, dict(params))).mappings()]
        compiled = self._compiled(connection.dialect)
        raw = await connection.get_raw_connection()
        rows = await raw.driver_connection.fetch_all(compiled.sql, compiled.arguments(params))  # type: ignore[union-attr]
        return [{key: value if read is None else read(value)
                 for key, read, value in zip(compiled.keys, compiled.readers, row, strict=True)} for row in rows]


class PreparedWrite(_Prepared):
    """An INSERT or UPDATE built once; `column_keys` are the columns it sets, named as its parameters."""

    async def run(self, session: AsyncSession, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run it once per row (one executemany)."""
        if not rows:
            return
        connection = await self._connection(session)
        if connection.dialect.name != "sqlite":
            await session.execute(self.stmt, [dict(row) for row in rows])
            return
        compiled = self._compiled(connection.dialect)
        raw = await connection.get_raw_connection()
        await raw.driver_connection.execute_many(  # type: ignore[union-attr]
            compiled.sql, [compiled.arguments(row) for row in rows])
