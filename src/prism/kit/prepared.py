"""A SELECT whose columns may be converted on the way out, run through the session like any statement.

SQLAlchemy compiles a statement once and caches it, converting values with the column types' own processors;
`read_column` chooses, once per column and dialect, a function applied to each converted value (e.g. dates
as ISO text for a JSON answer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

Processor = Callable[[Any], Any]
# (selected column, dialect, None) -> the function applied to the column's values, or None to keep them. The
# third argument is always None: values arrive already converted by the column's type.
ProcessorChoice = Callable[[Any, Dialect, "Processor | None"], "Processor | None"]


class Prepared:
    """A Core SELECT with per-column conversion of what it reads."""

    def __init__(self, stmt: Select[Any], *, read_column: ProcessorChoice | None = None) -> None:
        self.stmt = stmt
        self.read_column = read_column
        self._readers: dict[str, tuple[tuple[str, Processor | None], ...]] = {}

    def _readers_for(self, dialect: Dialect) -> tuple[tuple[str, Processor | None], ...]:
        readers = self._readers.get(dialect.name)
        if readers is None:
            choose = self.read_column
            readers = self._readers[dialect.name] = tuple(
                (str(column.key), choose(column, dialect, None) if choose is not None else None)
                for column in self.stmt.selected_columns)
        return readers

    async def fetch_one(self, session: AsyncSession, **params: Any) -> dict[str, Any] | None:
        row = (await session.execute(self.stmt, params)).first()
        if row is None:
            return None
        readers = self._readers_for(session.get_bind().dialect)
        return {key: value if read is None else read(value)
                for (key, read), value in zip(readers, row, strict=True)}
