"""The webhook admin page /admin/integrations/webhooks/: webhooks, recent deliveries, test and resend.

Server-rendered on the browser foundation (`prism.web.browser`): sign-in required, every form carries the
session's CSRF token, pages cannot be framed and are never cached. A person sees the organizations they
belong to on this host whose role grants `governance.view_webhook`; the buttons need
`governance.change_webhook`. Actions run the same handlers as the API, so "Send test event" runs
the real pipeline (outbox, worker, signature) with `is_test` true. They are dispatched, as the console's are
(door `console`): each is in the audit ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import func, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.auth.context import AuthContext
from prism.auth.person import memberships
from prism.console.caller import ConsoleCaller, browser_caller, notice_key
from prism.edge.doors import PAGE as PAGE_DOOR
from prism.edge.doors import door_routes
from prism.errors import NotFound, PrismError
from prism.models import Tenant, User
from prism.web.browser import (
    login_url,
    read_form,
    redirect,
    render,
    signed_in_user,
)
from prism.web.requests import host_of
from prism.webhooks import service
from prism.webhooks.models import Webhook, WebhookDelivery
from prism.webhooks.repository import Deliveries, Webhooks

PAGE = "/admin/integrations/webhooks/"
RECENT_DELIVERIES = 10
# Webhooks listed per organization, the newest; the API pages through them all.
LISTED_WEBHOOKS = 100
NOTICES = {"test": "Test event queued: it appears below once sent (reload the page).",
           "resend": "Delivery queued again."}


@dataclass(frozen=True)
class HookView:
    webhook: dict[str, Any]
    deliveries: list[dict[str, Any]]


@dataclass(frozen=True)
class OrganizationView:
    auth: AuthContext
    can_change: bool
    hooks: list[HookView]  # the newest LISTED_WEBHOOKS
    total: int  # how many webhooks the organization has

    @property
    def listed_note(self) -> str | None:
        return newest_of(len(self.hooks), self.total)


def newest_of(listed: int, total: int) -> str | None:
    """What the page says under an organization's webhooks when it lists only the newest of them."""
    return None if total <= listed else f"The {listed} newest of {total:,}; the API lists them all."


async def _contexts(session: AsyncSession, user: User, request: Request) -> list[AuthContext]:
    """One context per organization of this host the person may see webhooks of: the signed-in browser session,
    as the console and the key dashboard act for it (`browser_caller`)."""
    stmt = memberships(user)
    host = host_of(request)
    if host.kind == "tenant":
        stmt = stmt.where(Tenant.subdomain == host.subdomain)
    rows = (await session.execute(stmt)).all()
    callers = [browser_caller(request, user, membership, []).auth for membership in rows]
    return sorted((auth for auth in callers if auth.permissions.allows("governance.view_webhook")),
                  key=lambda auth: (auth.organization_name, auth.organization_id))


async def _organization_view(session: AsyncSession, auth: AuthContext) -> OrganizationView:
    webhooks = Webhooks(session, auth.organization_id).base()
    total = (await session.execute(select(func.count()).select_from(webhooks.subquery()))).scalar_one()
    rows = list((await session.execute(webhooks.order_by(Webhook.created_at.desc(), Webhook.id)
                                       .limit(LISTED_WEBHOOKS))).scalars())
    recent = await _recent_deliveries(session, auth.organization_id, [row.id for row in rows])
    hooks = [HookView(service.webhook_read(row),
                      [service.delivery_read(d, webhook_active=row.is_active) for d in recent.get(row.id, [])])
             for row in rows]
    return OrganizationView(auth, auth.permissions.allows("governance.change_webhook"), hooks, int(total))


async def _recent_deliveries(session: AsyncSession, organization_id: str,
                             webhook_ids: list[str]) -> dict[str, list[WebhookDelivery]]:
    """The RECENT_DELIVERIES newest deliveries of each webhook, newest first, in one query: one branch per webhook,
    each read off the (webhook_id, created_at) index with its own LIMIT, so a webhook with millions of deliveries
    costs no more than one with ten (a window over all their deliveries would sort them all)."""
    if not webhook_ids:
        return {}
    newest_first = (WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
    deliveries = Deliveries(session, organization_id)
    # Each branch is wrapped as a subquery: SQLite allows no LIMIT on a bare member of a UNION.
    branches = [deliveries.filtered(webhook_id, status=None, event_type=None).order_by(*newest_first)
                .limit(RECENT_DELIVERIES).subquery().select() for webhook_id in webhook_ids]
    recent = aliased(WebhookDelivery, union_all(*branches).subquery())
    found: dict[str, list[WebhookDelivery]] = {}
    for row in (await session.execute(select(recent).order_by(recent.created_at.desc(), recent.id.desc()))).scalars():
        found.setdefault(row.webhook_id, []).append(row)
    return found


async def _page(request: Request, user: User, *, notice: str | None = None, error: str | None = None,
                status: int = 200) -> Response:
    async with request.app.state.db.read() as session:
        views = [await _organization_view(session, auth) for auth in await _contexts(session, user, request)]
    return render(request, "webhooks_admin.html", {"user": user, "organizations": views, "notice": notice,
                                                   "error": error}, status=status)


async def page(request: Request) -> Response:
    user = await signed_in_user(request)
    if user is None:
        return redirect(request, login_url(request))
    # Only known notices: a crafted link cannot put words of its own on the page.
    return await _page(request, user, notice=NOTICES.get(request.query_params.get("done", "")))


async def _act(request: Request, action: str) -> Response:
    user = await signed_in_user(request)
    if user is None:
        # The form's action answers only POST: after signing in, the person comes back to the page instead.
        return redirect(request, "/login/?" + urlencode({"next": PAGE}))
    webhook_id = request.path_params["webhook_id"]
    try:
        form = await read_form(request)
        async with request.app.state.db.read() as session:
            auth = next((a for a in await _contexts(session, user, request)
                         if a.organization_id == form.get("organization")), None)
        if auth is None:
            raise NotFound("webhook not found")
        # Dispatched as the console's actions are: RBAC, the ledger entry, the events, as for an API call.
        coordinate, arguments = (("config_manage/governance/webhook/test", {"id": webhook_id}) if action == "test"
                                 else ("config_manage/governance/webhook_delivery/resend",
                                       {"webhook_id": webhook_id, "id": request.path_params["delivery_id"]}))
        await ConsoleCaller(user, auth, [], notice_key(request)).call(request, coordinate, arguments)
    except PrismError as exc:
        return await _page(request, user, error=exc.message, status=exc.status)
    return redirect(request, f"{PAGE}?done={action}")


async def send_test(request: Request) -> Response:
    return await _act(request, "test")


async def resend(request: Request) -> Response:
    return await _act(request, "resend")


def routes() -> list[BaseRoute]:
    return [
        *door_routes(PAGE, page, ["GET"], PAGE_DOOR),
        *door_routes(PAGE + "{webhook_id}/test/", send_test, ["POST"], PAGE_DOOR),
        *door_routes(PAGE + "{webhook_id}/deliveries/{delivery_id}/resend/", resend, ["POST"], PAGE_DOOR),
    ]
