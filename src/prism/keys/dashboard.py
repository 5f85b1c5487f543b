"""The key dashboard (/keys/): a signed-in user's own keys per organization; mint and revoke.

Built on the browser foundation (`prism.web.browser`): signed session cookie, CSRF on every form,
pages that cannot be framed and are never cached. A user sees and touches only keys they own, in
organizations they belong to on this host (every tenant on the platform host and the portal, one on a tenant
host); keys are read through each organization's repository, so another organization's key is not found.
The plaintext of a new key appears once, in the answer to the form that minted it.

Minting and revoking are the keys handlers' (`config_manage/keys/key/create|revoke`), dispatched as the
console dispatches them: the signed-in session acting in the key's organization (credential `console`, door
`console`), so `keys.add_key` and `keys.change_key` are checked and each leaves a ledger entry, as on
/console/keys/. A refusal shows the dashboard's refusal page with its status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response

from prism.auth.person import membership_in
from prism.console.caller import ConsoleCaller, browser_caller
from prism.console.keys import KEYS, revoke_own_key
from prism.errors import BadRequest, NotFound, PrismError
from prism.keys.registration import organizations_on_host
from prism.keys.service import check_tool_surface
from prism.kit.numbers import whole_number
from prism.mcp_server.surfaces import SURFACES
from prism.models import ApiKey, Organization, Tenant, User
from prism.registry.mega_tools import PLATFORM_SCOPES
from prism.tenancy.repository import OrgRepository
from prism.web.browser import login_url, read_form, redirect, render, signed_in_user
from prism.web.requests import host_of

DASHBOARD_PATH = "/keys/"
MAX_EXPIRY_DAYS = 3650


@dataclass(frozen=True)
class OrganizationKeys:
    organization: Organization
    tenant: str
    keys: list[dict[str, Any]]  # the keys handler's records: the newest 100
    total: int  # how many keys the person has there
    may_list: bool  # the person's role there has `keys.view_key`
    unlisted: str | None = None  # why the listing failed (a busy database): the page is still shown


def _own_keys(session: AsyncSession, organization: Organization, user: User) -> Any:
    return OrgRepository(session, ApiKey, organization.id, label="key").base().where(ApiKey.user_id == user.id)


async def _groups(request: Request, user: User) -> list[OrganizationKeys]:
    async with request.app.state.db.read() as session:
        organizations = await organizations_on_host(session, user, host_of(request))
        tenant_ids = {o.tenant_id for o in organizations}
        tenants = {t.id: t for t in (await session.execute(select(Tenant).where(Tenant.id.in_(tenant_ids)))).scalars()}
        callers = [(o, await _caller_in(request, session, user, o)) for o in organizations]
    groups = []
    for organization, caller in callers:
        # Listed by the keys handler, as on the console: the role's `keys.view_key`, and the listing audited.
        may_list = caller.may(f"{KEYS}/list", request)
        listed: dict[str, Any] = {"items": [], "total": 0}
        unlisted = None
        if may_list:
            try:
                listed = await caller.call(request, f"{KEYS}/list", {"page_size": 100})
            except PrismError as exc:  # the page must still show what was just minted, once
                unlisted = exc.message
        tenant = tenants[organization.tenant_id]
        groups.append(OrganizationKeys(organization, tenant.name or tenant.subdomain, listed["items"],
                                       listed["total"], may_list, unlisted))
    return groups


async def _page(request: Request, user: User, *, status: int = 200, minted: dict[str, Any] | None = None,
                error: str | None = None) -> Response:
    groups = await _groups(request, user)
    context = {"user": user, "groups": groups, "scopes": PLATFORM_SCOPES, "surfaces": SURFACES, "error": error,
               "new_key": minted["api_key"] if minted else None,
               "new_key_prefix": minted["prefix"] if minted else None}
    return render(request, "keys.html", context, status=status)


def _refusal(request: Request, exc: PrismError) -> Response:
    return render(request, "message.html", {"heading": "Request refused", "error": exc.code,
                                            "message": exc.message}, status=exc.status)


def _login(request: Request) -> str:
    """The login page, coming back here afterwards. A form posted after the session ended comes back to the
    dashboard itself: a redirect cannot post the form again, and its action answers only POST (a GET is 405)."""
    return login_url(request) if request.method == "GET" else "/login/?" + urlencode({"next": DASHBOARD_PATH})


async def show(request: Request) -> Response:
    user = await signed_in_user(request)
    if user is None:
        return redirect(request, _login(request))
    try:
        return await _page(request, user)
    except PrismError as exc:
        return _refusal(request, exc)


def _expiry_days(raw: str) -> int | None:
    if not raw.strip():
        return None
    days = whole_number(raw.strip())
    if days is None or not 1 <= days <= MAX_EXPIRY_DAYS:
        raise BadRequest(f"expiry: a whole number of days from 1 to {MAX_EXPIRY_DAYS}, or empty for none",
                         code="invalid_expiry")
    return days


async def _caller_in(request: Request, session: AsyncSession, user: User, organization: Organization) -> ConsoleCaller:
    """The signed-in person acting in one of their organizations, as the console's caller (credential `console`)."""
    return browser_caller(request, user, await membership_in(session, user, organization.id), [])


async def mint(request: Request) -> Response:
    user = await signed_in_user(request)
    if user is None:
        return redirect(request, _login(request))
    try:
        form = await read_form(request)
        scopes = [s for s in PLATFORM_SCOPES if form.get(s)]
        if not scopes:
            raise BadRequest("choose at least one scope", code="invalid_scope")
        expires_days = _expiry_days(form.get("expires_days", ""))
        tool_surface = check_tool_surface(form.get("tool_surface"))
        async with request.app.state.db.read() as session:
            organizations = await organizations_on_host(session, user, host_of(request))
            organization = next((o for o in organizations if o.id == form.get("organization")), None)
            if organization is None:
                raise NotFound("organization not found among your organizations", code="organization_not_found")
            caller = await _caller_in(request, session, user, organization)
        # The keys handler mints: the same permission (`keys.add_key`) and ledger entry as on the console.
        minted = await caller.call(request, f"{KEYS}/create", {
            "name": form.get("name", ""), "scopes": scopes, "expires_days": expires_days,
            "tool_surface": tool_surface})
    except BadRequest as exc:
        return await _page(request, user, status=exc.status, error=exc.message)
    except PrismError as exc:
        return _refusal(request, exc)
    return await _page(request, user, status=201, minted=minted)


async def _owner_organization(session: AsyncSession, user: User, request: Request, key_id: str) -> Organization:
    """Which of the person's organizations on this host holds their key `key_id`: the dashboard's revoke form
    names only the key, and the handler revokes within one organization."""
    for organization in await organizations_on_host(session, user, host_of(request)):
        stmt = _own_keys(session, organization, user).where(ApiKey.id == key_id)
        if (await session.execute(stmt)).scalar_one_or_none() is not None:
            return organization
    raise NotFound(f"key {key_id!r} not found among your keys", code="key_not_found")


async def revoke(request: Request) -> Response:
    user = await signed_in_user(request)
    if user is None:
        return redirect(request, _login(request))
    try:
        await read_form(request)
        key_id = request.path_params["key_id"]
        async with request.app.state.db.read() as session:
            caller = await _caller_in(request, session, user, await _owner_organization(session, user, request,
                                                                                        key_id))
        await revoke_own_key(request, caller, key_id)
    except PrismError as exc:
        return _refusal(request, exc)
    return redirect(request, DASHBOARD_PATH)
