"""The one place organization scoping lives.

Every tenant-scoped query starts from `OrgRepository.base()`, which already filters the caller's
organization; an id of another organization is therefore simply "not found" (404), never forbidden,
so nothing about its existence leaks. tests/test_tenancy_isolation.py enforces this.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, bindparam, func, or_, select
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from prism.errors import InvalidArguments, NotFound
from prism.kit.prepared import Prepared, Processor
from prism.kit.timeutil import iso, iso_of_sqlite_text
from prism.models.base import Base, UTCDateTime

M = TypeVar("M", bound=Base)


HIDDEN_COLUMNS = frozenset({"organization_id"})


def _json_ready(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def to_record(row: Base) -> dict[str, Any]:
    """An ORM row as JSON-ready data: dates as ISO strings, the organization column left out."""
    return {c.key: _json_ready(getattr(row, c.key)) for c in row.__table__.columns if c.key not in HIDDEN_COLUMNS}


def _temporal(column: Any) -> bool:
    """Whether the column's values may be dates or datetimes: its Python type is one, or does not rule them
    out (`object`, what a type that does not say reports, as UTCDateTime does)."""
    try:
        python_type = column.type.python_type
    except NotImplementedError:
        return True
    return not isinstance(python_type, type) or issubclass(python_type, date) or issubclass(date, python_type)


def _read_for_json(column: Any, dialect: Dialect, processor: Processor | None) -> Processor | None:
    """A column of a prepared read, read as `to_record` presents it: dates and datetimes as ISO text.

    Only the columns that may hold dates are converted at all; a UTCDateTime on SQLite goes from its stored
    text to ISO text directly (falling back to the full conversion for text of any other form).
    """
    if not _temporal(column):
        return processor
    convert: Processor = _json_ready if processor is None else (lambda value: _json_ready(processor(value)))
    if dialect.name != "sqlite" or type(column.type) is not UTCDateTime:
        return convert

    def read(value: Any) -> Any:
        if type(value) is str:
            text = iso_of_sqlite_text(value)
            if text is not None:
                return text
        return convert(value)

    return read


class _ByIdRead:
    """A table's read by id on the prepared path: the columns `to_record` shows, in its form and order."""

    __slots__ = ("prepared",)

    def __init__(self, table: Any) -> None:
        shown = [c for c in table.columns if c.key not in HIDDEN_COLUMNS]
        self.prepared = Prepared(select(*shown).where(
            table.c.organization_id == bindparam("org_id"), table.c.id == bindparam("record_id")),
            read_column=_read_for_json)


_BY_ID: dict[type[Base], _ByIdRead] = {}


class OrgRepository(Generic[M]):
    def __init__(self, session: AsyncSession, model: type[M], organization_id: str, *,
                 label: str | None = None) -> None:
        self.session = session
        self.model = model
        self.organization_id = organization_id
        self.label = label or model.__tablename__

    def base(self) -> Select[M]:
        org_column: InstrumentedAttribute[str] = self.model.organization_id  # type: ignore[attr-defined]
        return select(self.model).where(org_column == self.organization_id)

    async def get(self, record_id: str) -> M:
        """The ORM object (to change or delete it); another organization's id is not found."""
        row = (await self.session.execute(
            self.base().where(self.model.id == record_id))).scalar_one_or_none()  # type: ignore[attr-defined]
        if row is None:
            raise NotFound(f"{self.label} {record_id!r} not found", code="not_found")
        return row

    async def get_record(self, record_id: str) -> dict[str, Any]:
        """The record as JSON-ready data, read on the prepared path (reads by id are the hot path)."""
        read = _BY_ID.get(self.model)
        if read is None:
            read = _BY_ID[self.model] = _ByIdRead(self.model.__table__)
        values = await read.prepared.fetch_one(self.session, org_id=self.organization_id, record_id=record_id)
        if values is None:
            raise NotFound(f"{self.label} {record_id!r} not found", code="not_found")
        return values

    def add(self, **values: Any) -> M:
        row = self.model(organization_id=self.organization_id, **values)
        self.session.add(row)
        return row

    async def page(self, stmt: Select[M], *, page: int, page_size: int, ordering: str | None,
                   orderable: tuple[str, ...], default_ordering: str) -> dict[str, Any]:
        total = (await self.session.execute(
            select(func.count()).select_from(stmt.order_by(None).subquery()))).scalar_one()
        descending, name = _parse_ordering(ordering or default_ordering, orderable)
        column = getattr(self.model, name)
        tiebreak = self.model.id  # type: ignore[attr-defined]
        stmt = stmt.order_by(column.desc() if descending else column.asc(),
                             tiebreak.desc() if descending else tiebreak.asc())
        rows = (await self.session.execute(stmt.limit(page_size).offset((page - 1) * page_size))).scalars()
        return {"items": [to_record(r) for r in rows], "page": page, "page_size": page_size, "total": total}


def _parse_ordering(ordering: str, orderable: tuple[str, ...]) -> tuple[bool, str]:
    descending = ordering.startswith("-")
    name = ordering.lstrip("-")
    if name not in orderable:
        raise InvalidArguments(f"ordering: must be one of {', '.join(orderable)} (prefix '-' for "
                               "descending)", details={"field": "ordering"})
    return descending, name


def text_search(stmt: Select[M], columns: list[Any], term: str | None) -> Select[M]:
    """Case-insensitive substring match over the given columns (LIKE escaping applied)."""
    if not term:
        return stmt
    escaped = term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return stmt.where(or_(*(func.lower(c).like(f"%{escaped}%", escape="\\") for c in columns)))
