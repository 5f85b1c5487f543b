"""organization: the organization's members and the tenant's roles (config_manage/organization/...), read only.

Every member may see who else belongs and with which role (`organization.view_member`,
`organization.view_role`, held by every seeded role): a person deciding an oversight request or reading the
ledger needs to know who the others are. Memberships are changed with `prism user` on the command line.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from prism.apps import shipped_examples
from prism.apps.params import ListParams
from prism.kit.timeutil import iso
from prism.models import Membership, Role, User
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import OrgRepository, parse_ordering, text_search

app = HandlerApp("organization", description="Members of the organization and their roles.",
                 examples=shipped_examples())


# The fields each list may be ordered by (`ordering`, "-" for descending), as the standard lists take them.
MEMBER_ORDERING: dict[str, Any] = {"email": User.email, "role": Role.name, "joined_at": Membership.created_at}
ROLE_ORDERING: dict[str, Any] = {"name": Role.name}


def _ordered(stmt: Any, ordering: str | None, columns: dict[str, Any], default: str, tiebreak: Any
             ) -> Any:  # a Select of the caller's columns
    descending, name = parse_ordering(ordering or default, tuple(columns))
    return stmt.order_by(*((c.desc() if descending else c.asc()) for c in (columns[name], tiebreak)))


@app.handler("config_manage", "member", "list", params=ListParams, scope="read",
             keywords=("members", "people", "team", "who belongs", "users"),
             description="List the organization's members with their role and when they joined (search: email; "
                         f"ordering: {', '.join(MEMBER_ORDERING)}).")
async def list_members(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    repo = OrgRepository(call.session, Membership, call.organization_id, label="member")
    stmt = text_search(repo.base().join(User, User.id == Membership.user_id), [User.email], p.search)
    total = (await call.session.execute(select(func.count()).select_from(stmt.subquery()))).scalar_one()
    rows = await call.session.execute(_ordered(
        stmt.with_only_columns(User.id, User.email, User.is_active, Role.name, Membership.created_at)
        .join(Role, Role.id == Membership.role_id), p.ordering, MEMBER_ORDERING, "email", User.id)
        .limit(p.page_size).offset((p.page - 1) * p.page_size))
    items = [{"user_id": user_id, "email": email, "active": active, "role": role, "joined_at": iso(joined)}
             for user_id, email, active, role, joined in rows]
    return {"items": items, "page": p.page, "page_size": p.page_size, "total": total}


@app.handler("config_manage", "role", "list", params=ListParams, scope="read",
             keywords=("roles", "permissions", "rbac", "access rights"),
             description="List the tenant's roles with the permission patterns each grants (search: name; "
                         "ordering: name).")
async def list_roles(call: HandlerCall, p: ListParams) -> dict[str, Any]:
    stmt = text_search(select(Role).where(Role.tenant_id == call.auth.tenant_id), [Role.name], p.search)
    total = (await call.session.execute(select(func.count()).select_from(stmt.subquery()))).scalar_one()
    roles = (await call.session.execute(_ordered(stmt, p.ordering, ROLE_ORDERING, "name", Role.id)
                                        .limit(p.page_size).offset((p.page - 1) * p.page_size))).scalars()
    items = [{"name": r.name, "permissions": list(r.permissions), "builtin": r.is_builtin} for r in roles]
    return {"items": items, "page": p.page, "page_size": p.page_size, "total": total}
