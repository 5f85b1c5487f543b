"""The one place organization scoping lives.

Every tenant-scoped query starts from `OrgRepository.base()`, which already filters the caller's
organization; an id of another organization is therefore simply "not found" (404), never forbidden,
so nothing about its existence leaks. tests/test_tenancy_isolation.py enforces this.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from prism.errors import InvalidArguments, NotFound
from prism.kit.timeutil import iso
from prism.models.base import Base

M = TypeVar("M", bound=Base)


def to_record(row: Base, *, exclude: frozenset[str] = frozenset({"organization_id"})) -> dict[str, Any]:
    """A row as JSON-ready data: dates as ISO strings, the organization column left out."""
    out: dict[str, Any] = {}
    for column in row.__table__.columns:
        if column.key in exclude:
            continue
        value = getattr(row, column.key)
        if isinstance(value, datetime):
            value = iso(value)
        elif isinstance(value, date):
            value = value.isoformat()
        out[column.key] = value
    return out


class OrgRepository(Generic[M]):
    def __init__(self, session: AsyncSession, model: type[M], organization_id: str, *,
                 label: str | None = None) -> None:
        self.session = session
        self.model = model
        self.organization_id = organization_id
        self.label = label or model.__tablename__
        self._org_column: InstrumentedAttribute[str] = model.organization_id  # type: ignore[attr-defined]

    def base(self) -> Select[tuple[M]]:
        return select(self.model).where(self._org_column == self.organization_id)

    async def get(self, record_id: str) -> M:
        row = (await self.session.execute(
            self.base().where(self.model.id == record_id))).scalar_one_or_none()  # type: ignore[attr-defined]
        if row is None:
            raise NotFound(f"{self.label} {record_id!r} not found", code="not_found")
        return row

    def add(self, **values: Any) -> M:
        row = self.model(organization_id=self.organization_id, **values)
        self.session.add(row)
        return row

    async def page(self, stmt: Select[tuple[M]], *, page: int, page_size: int, ordering: str | None,
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


def text_search(stmt: Select[tuple[M]], columns: list[Any], term: str | None) -> Select[tuple[M]]:
    """Case-insensitive substring match over the given columns (LIKE escaping applied)."""
    if not term:
        return stmt
    escaped = term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return stmt.where(or_(*(func.lower(c).like(f"%{escaped}%", escape="\\") for c in columns)))
