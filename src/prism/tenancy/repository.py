"""Reading and adding one organization's records.

Queries of an organization's records start from `OrgRepository.base()`, limited to that organization: in a
dispatched call by the session itself, which acts for the caller's organization and filters every statement
(prism.tenancy.scope); elsewhere by the criterion the repository writes. An id of another organization is
therefore simply "not found" (404), never forbidden, so nothing about its existence leaks.
tests/test_tenancy_isolation.py and tests/test_tenancy_scope.py enforce this.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import date, datetime
from functools import cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import Column, Index, Select, UniqueConstraint, bindparam, case, func, inspect, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from prism.errors import InvalidArguments, NotFound
from prism.kit.paging import envelope
from prism.kit.timeutil import iso
from prism.models.base import Base
from prism.storage.prepared import PreparedRead
from prism.tenancy.scope import acting_organization

M = TypeVar("M", bound=Base)
# Fields whose words are ordered by rank, not spelling: field name → its words, lowest first (OrgRepository.ordered).
Ranks = Mapping[str, Sequence[str]]


# A sealed column (prism.integrations.sealed_urls) is opened only where Prism sends a request: never shown.
HIDDEN_COLUMNS = frozenset({"organization_id", "sealed_urls"})


def _json_ready(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def _shown(model: type[Base]) -> list[Any]:
    """The table columns a record shows, in table order: all but HIDDEN_COLUMNS."""
    return [c for c in model.__table__.columns if c.key not in HIDDEN_COLUMNS]


def to_record(row: Base) -> dict[str, Any]:
    """An ORM row as JSON-ready data: dates as ISO strings, the organization column left out."""
    return {c.key: _json_ready(getattr(row, c.key)) for c in _shown(type(row))}


def sent_changes(params: BaseModel, model: type[Base], *, exclude: Collection[str] = ("id",),
                 rename: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What an update sets, by column: the fields the caller sent, and only those (absent keeps a value).

    A field sent as `null` clears it: a nullable column becomes NULL, a column that cannot be NULL but starts
    empty (text `""`, a JSON `[]` or `{}`) becomes empty again; any other column (a name, a quantity, a
    status) cannot be cleared, and every such field is refused at once, 400 naming each. `rename` maps a
    parameter to its column where their names differ. docs/extending.md "Updates" describes it for handlers."""
    rename = rename or {}
    sent = params.model_fields_set - set(exclude)
    values = {rename.get(name, name): value for name, value in params.model_dump(include=sent).items()}
    columns = model.__table__.columns
    problems = []
    for name, value in values.items():
        column = columns.get(name)
        if value is not None or column is None or column.nullable:
            continue
        empty = _empty_default(column)
        if empty is None:
            field = next((k for k, v in rename.items() if v == name), name)
            problems.append({"field": field, "message": "cannot be cleared (null); send a value"})
        else:
            values[name] = empty
    if problems:
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems})
    return values


def _empty_default(column: Any) -> Any:
    """The empty value a NOT NULL column starts with (`""`, `[]`, `{}`), or None when it starts otherwise."""
    default = column.default
    if default is None:
        return None
    value = default.arg
    if callable(value) and not getattr(default, "is_clause_element", False):
        try:
            value = value(None)  # SQLAlchemy wraps a default callable to take the execution context
        except Exception:  # a callable needing a real context (a clock, a counter) is no empty default
            return None
    return value if value in ("", [], {}) else None


def _read_by_id(model: type[Base]) -> PreparedRead:
    """The columns a record shows (as `to_record` shows them, in table order) of one row of one organization, as
    a Core statement built once per model: its organization and id are bound at each execution."""
    read = _BY_ID.get(model)
    if read is None:
        table = model.__table__
        read = _BY_ID[model] = PreparedRead(select(*_shown(model)).where(
            table.c.organization_id == bindparam("organization_id"), table.c.id == bindparam("record_id")))
    return read


_BY_ID: dict[type[Base], PreparedRead] = {}


def _shown_columns(model: type[Base]) -> dict[str, Any]:
    """The model's attributes for the columns a record shows (as `to_record` shows them, in table order), by key."""
    shown = _SHOWN.get(model)
    if shown is None:
        shown = _SHOWN[model] = {c.key: getattr(model, c.key) for c in _shown(model)}
    return shown


_SHOWN: dict[type[Base], dict[str, Any]] = {}


class OrgRepository(Generic[M]):
    def __init__(self, session: AsyncSession, model: type[M], organization_id: str, *,
                 label: str | None = None) -> None:
        self.session = session
        self.model = model
        self.organization_id = organization_id
        self.label = label or model.__tablename__

    def base(self) -> Select[M]:
        return self._scoped(select(self.model))

    def _scoped(self, stmt: Select[Any]) -> Select[Any]:
        """The statement, limited to the repository's organization.

        A session acting for that organization (every dispatched call's) adds the criterion to each statement
        itself (prism.tenancy.scope), so it is not written twice; anywhere else (the webhook API, the CLI) the
        repository writes it. A session acting for another organization is a mistake, not a query to run.
        """
        acting = acting_organization(self.session)
        if acting == self.organization_id:
            return stmt
        if acting is not None:
            raise RuntimeError(f"a repository of organization {self.organization_id!r} used in a session acting "
                               f"for {acting!r}")
        org_column: InstrumentedAttribute[str] = self.model.organization_id  # type: ignore[attr-defined]
        return stmt.where(org_column == self.organization_id)

    async def get(self, record_id: str, *, for_update: bool = False) -> M:
        """The ORM object (to change or delete it); another organization's id is not found.

        `for_update` locks the row until the transaction ends and reads it afresh once the lock is held: a change
        worked out from what was read (a version bumped, a counter moved) then starts from the last committed
        row, never from one a concurrent transaction is about to replace. PostgreSQL takes the lock; SQLite
        renders no FOR UPDATE, its writers being serialised already.
        """
        stmt = self.base().where(self.model.id == record_id)  # type: ignore[attr-defined]
        if for_update:
            stmt = stmt.with_for_update().execution_options(populate_existing=True)
        row = (await self.session.execute(stmt)).scalar_one_or_none()
        if row is None:
            raise NotFound(f"{self.label} {record_id!r} not found", code="not_found")
        return row

    async def get_record(self, record_id: str) -> dict[str, Any]:
        """The record as `to_record` shows it. Reads by id are the hot path: a Core statement built once per model,
        which names the organization itself (the session's criterion applies to ORM statements only), and no ORM
        object (prism.storage.prepared)."""
        values = await _read_by_id(self.model).one(self.session, {"organization_id": self.organization_id,
                                                                  "record_id": record_id})
        if values is None:
            raise NotFound(f"{self.label} {record_id!r} not found", code="not_found")
        return {key: _json_ready(value) for key, value in values.items()}

    def add(self, **values: Any) -> M:
        row = self.model(organization_id=self.organization_id, **values)
        self.session.add(row)
        return row

    async def total(self, stmt: Select[Any]) -> int:
        """How many rows the statement selects, counted by the database."""
        return int((await self.session.execute(
            select(func.count()).select_from(stmt.order_by(None).subquery()))).scalar_one())

    def ordered(self, stmt: Select[Any], ordering: str | None, orderable: tuple[str, ...],
                default_ordering: str, ranks: Ranks | None = None) -> Select[Any]:
        """The statement ordered by `ordering` ("name", "-created_at"; one of `orderable`, else a 400), ties
        broken by id in the same direction so that pages never overlap.

        A field named in `ranks` holds words with an order of their own (a priority: low, medium, high, urgent),
        which spelling does not give: it is ordered by its word's place in that list, lowest first ("-priority"
        puts the most urgent first). A word the list does not hold goes after the highest."""
        descending, name = parse_ordering(ordering or default_ordering, orderable)
        column = getattr(self.model, name)
        if ranks and name in ranks:
            words = ranks[name]
            column = case({word: place for place, word in enumerate(words)}, value=column, else_=len(words))
        tiebreak = self.model.id  # type: ignore[attr-defined]
        order = column.desc() if descending else column.asc()
        if _nulls_go_last(self.model, name):
            order = order.nulls_last()
        return stmt.order_by(order, tiebreak.desc() if descending else tiebreak.asc())

    async def page(self, stmt: Select[M], *, page: int, page_size: int, ordering: str | None = None,
                   orderable: tuple[str, ...] = (), default_ordering: str = "-created_at",
                   order: tuple[Any, ...] = (), ranks: Ranks | None = None) -> dict[str, Any]:
        """One page of `stmt`, ordered by `ordering` (one of `orderable`; by rank for a field in `ranks`, see
        `ordered`), or by `order`, expressions of the caller's own that end in a unique column (an order no single
        column gives)."""
        total = await self.total(stmt)
        stmt = stmt.order_by(*order) if order else self.ordered(stmt, ordering, orderable, default_ordering, ranks)
        # The columns a record shows rather than ORM objects: a page is only read, and building, tracking and then
        # reading back an object per row cost about as much again as the row itself (bench/README.md).
        shown = _shown_columns(self.model)
        rows = await self.session.execute(stmt.with_only_columns(*shown.values(), maintain_column_froms=True)
                                          .limit(page_size).offset((page - 1) * page_size))
        keys = tuple(shown)
        return envelope([{key: _json_ready(value) for key, value in zip(keys, row, strict=True)} for row in rows],
                        page, page_size, total)


@cache
def _nulls_go_last(model: type, name: str) -> bool:
    """Whether records without the ordering's value are put last whichever the direction, as the engines do not
    agree (PostgreSQL sorts NULLs high, SQLite low): for a nullable column that no index or unique constraint
    holds. An indexed column keeps its engine's order, so that its index still serves the page read backwards
    (`audit_entries.seq`: an entry not yet sealed has none); a NOT NULL column has no NULLs to place."""
    column: Column[Any] = inspect(model).columns[name]
    if not column.nullable:
        return False
    table = column.table
    held: list[Index | UniqueConstraint] = [*table.indexes, *(c for c in table.constraints
                                                              if isinstance(c, UniqueConstraint))]
    return not any(column.name in held_by.columns for held_by in held)


def parse_ordering(ordering: str, orderable: tuple[str, ...]) -> tuple[bool, str]:
    descending = ordering.startswith("-")
    name = ordering.removeprefix("-")  # one '-' only: "--id" is no ordering
    if name not in orderable:
        raise InvalidArguments(f"ordering: must be one of {', '.join(orderable)} (prefix '-' for "
                               "descending)", field="ordering")
    return descending, name


def text_search(stmt: Select[M], columns: list[Any], term: str | None) -> Select[M]:
    """Case-insensitive substring match over the given columns (LIKE escaping applied)."""
    if not term:
        return stmt
    escaped = term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return stmt.where(or_(*(func.lower(c).like(f"%{escaped}%", escape="\\") for c in columns)))
