"""The organization a session acts for, and the one criterion that follows from it.

A dispatched call runs with its session acting for the caller's organization (`acting_for`). While it does,
every ORM SELECT, UPDATE and DELETE executed on the session that touches an organization-scoped model
(`OrgScoped`) — as the selected entity, in a join, a subquery, `select_from`, an alias — gets
`organization_id = <acting organization>` added by SQLAlchemy's `with_loader_criteria`, the documented
multi-tenancy recipe. A handler therefore cannot read, count or change another organization's rows even if
it forgets to filter, and another organization's id is simply not found (404).

Sessions that act for no organization (authentication, the ledger, webhook workers, migrations, the CLI)
are platform code, not an organization's: nothing is added to their statements. A statement inside an
organization's session that must read across organizations says so with `across_organizations(...)`.

The criterion is built once, with a named bound parameter whose value is supplied per execution, so every
statement shares one option.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import ForeignKey, bindparam, event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, ORMExecuteState, Session, mapped_column, with_loader_criteria
from sqlalchemy.sql import Executable

ACTING_ORGANIZATION = "prism.acting_organization"  # key in Session.info
ACROSS_ORGANIZATIONS = "prism_across_organizations"  # execution option: the named opt-out
ORGANIZATION_PARAMETER = "prism_acting_organization"  # bound parameter of the added criterion

E = TypeVar("E", bound=Executable)


class OrgScoped:
    """Marks a model whose rows belong to one organization: it has an `organization_id` column.

    Every such model must carry this mark (tests/test_tenancy_scope.py checks it); the mark is what the
    session's criterion is applied to. The column below is what a model gets if it does not declare its own
    (the built-in tables all do, so their schema is their own declaration); SQLAlchemy also reads it once, to
    analyse the criterion. Typed optional only so that a model may declare it optional (an OAuth grant
    chosen without an organization); the column itself is required.
    """

    organization_id: Mapped[str | None] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"),
                                                        index=True, nullable=False)


# The parameter's name is spelled out in the lambda: SQLAlchemy tracks every name a criterion lambda reads
# from outside as a value of the statement, which a bound parameter's name cannot be.
ORGANIZATION_CRITERION = with_loader_criteria(
    OrgScoped, lambda cls: cls.organization_id == bindparam("prism_acting_organization"), include_aliases=True)


@contextmanager
def acting_for(session: AsyncSession | Session, organization_id: str) -> Iterator[None]:
    """Scope every statement the session executes meanwhile to `organization_id`.

    The previous value comes back on exit: the ledger's batch session runs the calls of several organizations
    one after the other, and what runs between them (appending entries, announcing them) acts for none.
    """
    info = session.info
    previous = info.get(ACTING_ORGANIZATION)
    info[ACTING_ORGANIZATION] = organization_id
    try:
        yield
    finally:
        if previous is None:
            info.pop(ACTING_ORGANIZATION, None)
        else:
            info[ACTING_ORGANIZATION] = previous


def acting_organization(session: AsyncSession | Session) -> str | None:
    organization_id: str | None = session.info.get(ACTING_ORGANIZATION)
    return organization_id


def across_organizations(statement: E) -> E:
    """The statement, exempt from the acting organization's criterion: for the few reads that must see other
    organizations' rows from inside an organization's session. Say why where you use it."""
    return statement.execution_options(**{ACROSS_ORGANIZATIONS: True})


@event.listens_for(Session, "do_orm_execute")
def _scope_to_the_acting_organization(state: ORMExecuteState) -> None:
    organization_id = state.session.info.get(ACTING_ORGANIZATION)
    if organization_id is None or not state.is_orm_statement or state.is_insert:
        return
    if state.execution_options.get(ACROSS_ORGANIZATIONS, False):
        return
    state.statement = state.statement.options(ORGANIZATION_CRITERION)
    parameters: Any = state.parameters
    if isinstance(parameters, list):  # an executemany (ORM bulk UPDATE by primary key): every row's set
        state.parameters = [{**row, ORGANIZATION_PARAMETER: organization_id} for row in parameters]
    else:
        state.parameters = {**(parameters or {}), ORGANIZATION_PARAMETER: organization_id}
