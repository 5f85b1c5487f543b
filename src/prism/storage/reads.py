"""Rows by a prepared Core SELECT, in the session's transaction, without SQLAlchemy's execution machinery.

On SQLite a statement by key costs about 1.5 µs in SQLite and about 100 µs in SQLAlchemy's execution path
(building the statement, its cache key, the execution context, the result) on this project's VM. The reads on
every call's path (a record by id, the ledger batch's head and webhooks) are therefore compiled once per dialect
and sent by Prism's SQLite driver on the session's own connection (so in its transaction); each column type's
public result processor turns the values into Python values, as SQLAlchemy would. PostgreSQL pays a network
round trip either way: there the session runs the statement. bench/README.md has the measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select
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


class PreparedRead:
    """A SELECT built once (with bound parameters) and kept; `one` runs it for one row, `all` for every row."""

    def __init__(self, stmt: Select[Any]) -> None:
        self.stmt = stmt
        self._by_dialect: dict[str, _Compiled] = {}

    def _compiled(self, dialect: Dialect) -> _Compiled:
        """Compiled once per dialect, with its parameters' order and its columns' processors."""
        hit = self._by_dialect.get(dialect.name)
        if hit is None:
            compiled = self.stmt.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            names = tuple(compiled.positiontup or ())
            columns = list(self.stmt.selected_columns)
            hit = self._by_dialect[dialect.name] = _Compiled(
                sql=compiled.string, parameter_names=names,
                binders=tuple(compiled.binds[name].type.bind_processor(dialect) for name in names),
                keys=tuple(str(column.key) for column in columns),
                readers=tuple(column.type.result_processor(dialect, None) for column in columns))
        return hit

    async def one(self, session: AsyncSession, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first row as a dict, or None. Pending ORM changes are flushed first, as an ORM query would."""
        rows = await self.all(session, params)
        return rows[0] if rows else None

    async def all(self, session: AsyncSession, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every row, as dicts. Pending ORM changes are flushed first, as an ORM query would."""
        if session.new or session.dirty or session.deleted:
            await session.flush()
        connection = await session.connection()
        if connection.dialect.name != "sqlite":
            return [dict(row) for row in (await session.execute(self.stmt, dict(params))).mappings()]
        compiled = self._compiled(connection.dialect)
        arguments = [value if bind is None else bind(value) for value, bind in
                     zip((params[name] for name in compiled.parameter_names), compiled.binders, strict=True)]
        raw = await connection.get_raw_connection()
        rows = await raw.driver_connection.fetch_all(compiled.sql, arguments)  # type: ignore[union-attr]
        return [{key: value if read is None else read(value)
                 for key, read, value in zip(compiled.keys, compiled.readers, row, strict=True)} for row in rows]
