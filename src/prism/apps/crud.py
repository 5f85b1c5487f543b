"""Standard record handlers for an app"s entity, declared once per entity.

    crud(app, Entity(model=Payer, name="payer", plural="payers", create=PayerCreate, ...))

declares `entity_crud/<app>/<entity>/{list,read,readMany,count,create,update,delete}` and
`report_query/<app>/<entity>/breakdown`. Lists answer `{items, page, page_size, total}`.

List filters are the extra fields of the entity"s list-parameter model, matched by name to columns:
`status` is equality, `<column>_min`/`_max` bound it inclusively, `<column>_before`/`_after` exclusively.
State-machine fields are deliberately absent from update models: they move only through the app"s
workflow actions, which check the transition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model
from sqlalchemy import Select, func, select

from prism.apps.params import DeleteParams, ListParams, OrderedListParams, Params, ReadParams
from prism.apps.sums import exact_sum, total
from prism.config import Settings
from prism.errors import InvalidArguments
from prism.models.base import Base
from prism.registry import HandlerApp, HandlerCall
from prism.storage import long_writes
from prism.tenancy.repository import OrgRepository, Ranks, sent_changes, text_search, to_record

Prepare = Callable[[HandlerCall, dict[str, Any], Any], Awaitable[dict[str, Any]]]
Hook = Callable[[HandlerCall, Any], Awaitable[None]]

# Parameters that are not column filters: paging, ordering, search, and the breakdown key.
_NOT_FILTERS = frozenset(ListParams.model_fields) | {"by"}
_PAGING = frozenset({"page", "page_size", "ordering"})


@dataclass(frozen=True)
class Entity:
    model: type[Base]
    name: str
    plural: str
    list_params: type[OrderedListParams]  # with `search` (ListParams) exactly when `search` names columns
    search: tuple[str, ...]
    orderable: tuple[str, ...]
    default_ordering: str
    create: type[Params] | None = None
    update: type[Params] | None = None
    deletable: bool = True
    group_by: tuple[str, ...] = ("status",)
    sums: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    # Checks references (same organization) and derives stored values, for create (row None) and update.
    prepare: Prepare | None = None
    # The create and update handlers' `Handler.prepare`: database-free work on their parameters (resolving a URL's
    # host) before the call's transaction; `prepare` finds its result in `HandlerCall.prepared`.
    before_transaction: Callable[[Any, Settings], Awaitable[Any]] | None = None
    after_create: Hook | None = None
    # Runs after a create or an update is flushed (derived totals elsewhere).
    after_write: Hook | None = None
    after_delete: Hook | None = None
    # Standard operations the app already declares itself (e.g. "list", "read").
    skip: frozenset[str] = frozenset()
    # Refuses a delete that would orphan or falsify other records (raise Conflict).
    before_delete: Hook | None = None
    # List filters that are not a column's condition by name: the filter's name → its condition for a value.
    filters: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    # Orderable fields of ranked words (a priority, a criticality): field → its words, lowest first. The list orders
    # them by rank, as a user means "by priority", not alphabetically (OrgRepository.ordered).
    ranks: Ranks = field(default_factory=dict)


def repo(call: HandlerCall, model: type[Any], label: str) -> OrgRepository[Any]:
    return OrgRepository(call.session, model, call.organization_id, label=label)


async def dependants(call: HandlerCall, *kinds: tuple[str, type[Base], Any]) -> str:
    """The records that still reference one a `before_delete` is asked to delete, as a message says them
    ("2 work orders and 1 maintenance plan"), or "" when there are none. Each kind is (a noun for one record,
    the model, the condition naming the record to delete): a refusal that names them, and says what to do,
    tells the caller more than the database's foreign key would (a bare 409 conflict)."""
    found = []
    for noun, model, refers in kinds:
        count = (await call.session.execute(select(func.count()).select_from(model).where(refers))).scalar_one()
        if count:
            found.append(f"{count} {noun}{'' if count == 1 else 's'}")
    return " and ".join(found)


def filtered(call: HandlerCall, e: Entity, p: BaseModel) -> Select[Any]:
    """The entity's rows matching the search and filters of `p`: one of its list, count or breakdown
    parameters, which take the same filters (an app's own list handler filters through this too)."""
    stmt = text_search(repo(call, e.model, e.name).base(), [getattr(e.model, c) for c in e.search],
                       getattr(p, "search", None))
    for name, value in p:
        if value is None or name in _NOT_FILTERS:
            continue
        stmt = stmt.where(e.filters[name](value) if name in e.filters else _condition(e.model, name, value))
    return stmt


def _condition(model: type[Base], name: str, value: Any) -> Any:
    for suffix, compare in (("_min", "__ge__"), ("_max", "__le__"), ("_before", "__lt__"), ("_after", "__gt__")):
        if name.endswith(suffix) and hasattr(model, name[: -len(suffix)]):
            return getattr(getattr(model, name[: -len(suffix)]), compare)(value)
    return getattr(model, name) == value


def count_params(list_params: type[OrderedListParams]) -> type[Params]:
    """The list filters without paging and ordering (count, breakdown)."""
    fields: dict[str, Any] = {name: (f.annotation, f) for name, f in list_params.model_fields.items()
                              if name not in _PAGING}
    model: type[Params] = create_model(list_params.__name__.replace("List", "Count"), __base__=Params,
                                       **fields)
    return model


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _fields(model: type[BaseModel]) -> str:
    return ", ".join(name for name in model.model_fields if name != "id")


def crud(app: HandlerApp, e: Entity) -> None:
    """Declare the standard handlers of one entity."""
    if bool(e.search) != ("search" in e.list_params.model_fields):
        # A search over no column would match every row: the term would be taken and silently ignored.
        raise ValueError(f"{e.name}: its list parameters take `search` exactly when `search` names columns")
    if set(e.ranks) - set(e.orderable):
        raise ValueError(f"{e.name}: ranked fields must be orderable")
    n, many = e.name, e.plural
    one = n.replace("_", " ")
    kw = e.keywords
    count_model = count_params(e.list_params)
    group_literal: Any = Literal[e.group_by]
    breakdown_model: type[Params] = create_model(
        count_model.__name__.replace("Count", "Breakdown"), __base__=count_model,
        by=(group_literal, Field(e.group_by[0], description=f"Field to group the {many} by.")))

    class ReadManyParams(Params):
        ids: list[str] = Field(..., min_length=1, max_length=100, description=f"Ids of the {many} to read.")

    ReadManyParams.__name__ = ReadManyParams.__qualname__ = f"{n.title().replace('_', '')}ReadMany"

    if "list" not in e.skip:
        @app.handler("entity_crud", n, "list", params=e.list_params, scope="read",
                     description=f"List {many} with filters, text search, ordering and paging.", keywords=kw)
        async def list_records(call: HandlerCall, p: ListParams) -> dict[str, Any]:
            return await repo(call, e.model, n).page(
                filtered(call, e, p), page=p.page, page_size=p.page_size, ordering=p.ordering,
                orderable=e.orderable, default_ordering=e.default_ordering, ranks=e.ranks)

    if "read" not in e.skip:
        @app.handler("entity_crud", n, "read", params=ReadParams, scope="read",
                     description=f"Read one {one} by id (all its fields).", keywords=kw)
        async def read_record(call: HandlerCall, p: ReadParams) -> dict[str, Any]:
            return await repo(call, e.model, n).get_record(p.id)

    if "readMany" not in e.skip:
        @app.handler("entity_crud", n, "readMany", params=ReadManyParams, scope="read",
                     description=f"Read several {many} by id at once; ids not found are listed as missing.",
                     keywords=kw)
        async def read_many(call: HandlerCall, p: ReadManyParams) -> dict[str, Any]:
            r = repo(call, e.model, n)
            rows = (await call.session.execute(r.base().where(e.model.id.in_(p.ids)))).scalars()  # type: ignore[attr-defined]
            found = {row.id: to_record(row) for row in rows}
            return {"items": [found[i] for i in dict.fromkeys(p.ids) if i in found],
                    "missing": [i for i in dict.fromkeys(p.ids) if i not in found]}

    if "count" not in e.skip:
        @app.handler("entity_crud", n, "count", params=count_model, scope="read",
                     description=f"Count {many} matching filters and text search.", keywords=kw)
        async def count_records(call: HandlerCall, p: BaseModel) -> dict[str, Any]:
            stmt = filtered(call, e, p)
            total = (await call.session.execute(select(func.count()).select_from(stmt.subquery()))).scalar_one()
            return {"count": total}

    if "breakdown" not in e.skip:
        @app.handler("report_query", n, "breakdown", params=breakdown_model, scope="read",
                     permission=f"{app.name}.view_{n}",
                     description=f"Break {many} down by {', '.join(e.group_by)}: count"
                                 + (f" and totals of {', '.join(e.sums)}" if e.sums else "") + " per value.",
                     keywords=(*kw, "summary", "statistics", "group by"))
        async def breakdown(call: HandlerCall, p: Any) -> dict[str, Any]:
            sub = filtered(call, e, p).subquery()
            key = sub.c[p.by]
            columns = [key, func.count()] + [half for s in e.sums for half in exact_sum(sub.c[s])]
            rows = (await call.session.execute(select(*columns).group_by(key).order_by(key))).all()
            groups = [{"value": _plain(row[0]), "count": row[1],
                       **{f"total_{s}": total(*row[2 + 2 * i: 4 + 2 * i]) for i, s in enumerate(e.sums)}}
                      for row in rows]
            return {"by": p.by, "groups": groups, "total": sum(g["count"] for g in groups)}

    if e.create is not None and "create" not in e.skip:
        @app.handler("entity_crud", n, "create", params=e.create, scope="write",
                     description=f"Create {_a(one)} ({_fields(e.create)}).", keywords=kw,
                     prepare=e.before_transaction)
        async def create_record(call: HandlerCall, p: BaseModel) -> dict[str, Any]:
            values = p.model_dump()
            if e.prepare is not None:
                values = await e.prepare(call, values, None)
            row = repo(call, e.model, n).add(**values)
            await call.session.flush()
            if e.after_write is not None:
                await e.after_write(call, row)
            if e.after_create is not None:
                await e.after_create(call, row)
            return to_record(row)

    if e.update is not None and "update" not in e.skip:
        @app.handler("entity_crud", n, "update", params=e.update, scope="write",
                     description=f"Change fields of {_a(one)}: {_fields(e.update)}.", keywords=kw,
                     prepare=e.before_transaction)
        async def update_record(call: HandlerCall, p: BaseModel) -> dict[str, Any]:
            row = await repo(call, e.model, n).get(p.id)  # type: ignore[attr-defined]
            values = sent_changes(p, e.model)  # null clears, absent keeps
            if not values:
                raise InvalidArguments("nothing to update: give at least one field besides id")
            if e.prepare is not None:
                values = await e.prepare(call, values, row)
            for name, value in values.items():
                setattr(row, name, value)
            await call.session.flush()
            if e.after_write is not None:
                await e.after_write(call, row)
            return to_record(row)

    if e.deletable and "delete" not in e.skip:
        @app.handler("entity_crud", n, "delete", params=DeleteParams, scope="write", destructive=True,
                     description=f"Delete {_a(one)} permanently"
                                 + (" (refused while other records depend on it)." if e.before_delete else "."),
                     keywords=kw)
        async def delete_record(call: HandlerCall, p: DeleteParams) -> dict[str, Any]:
            row = await repo(call, e.model, n).get(p.id)
            if e.before_delete is not None:
                await e.before_delete(call, row)
            # The database deletes what references the record (ON DELETE CASCADE): a document's tens of thousands of
            # postings, as many rows as no statement's parameters tell. On SQLite that runs off the event loop.
            async with long_writes(call.session):
                await call.session.delete(row)
                await call.session.flush()
            if e.after_delete is not None:
                await e.after_delete(call, row)
            return {"id": p.id, "deleted": True}


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value
