"""Who is using the console, as the dispatcher sees them: a signed-in person acting in one organization.

The console has no privileges of its own. Each action is a dispatched call (prism.dispatch), made with an
AuthContext built from the browser session: the user, the organization chosen (`?org=`, by default their first
on this tenant host) and their role's permissions there. So the dispatcher checks RBAC, writes the ledger entry
(door `console`) and the governance decision exactly as for an API call. The credential is the browser session
(`console:` and a digest of the session's CSRF token: it names one sign-in, and reveals nothing of it); its
scopes are all three, the role decides (prism.auth.person). The key dashboard (/keys/) and the webhook admin
page act through the same caller.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request

from prism.auth.context import AuthContext
from prism.auth.person import MembershipRow, memberships, person_context
from prism.dispatch.dispatcher import Call
from prism.edge.context import request_context
from prism.errors import NotFound, PermissionDenied, PrismError
from prism.kit.secret import derived_key, same_secret
from prism.models import Tenant, User
from prism.registry.mega_tools import tool_name
from prism.web.browser import browser_session, session_credential
from prism.web.requests import host_of

DOOR = "console"


class NotATenantHost(PrismError):
    code, status = "tenant_host_required", 404


@dataclass(frozen=True, slots=True)
class OrganizationChoice:
    id: str
    name: str
    role: str


@dataclass(frozen=True, slots=True)
class ConsoleCaller:
    user: User
    auth: AuthContext
    organizations: list[OrganizationChoice]
    notice_key: bytes  # signs the notices this session's redirects carry (`link`, `notice`)

    def may(self, coordinate: str, request: Request) -> bool:
        """Whether the dispatcher would let this person call the handler: the console shows only what they may do."""
        handler = request.app.state.dispatcher.registry.get_path(coordinate)
        return handler is not None and self.auth.permissions.allows(handler.permission)

    def link(self, path: str, **query: Any) -> str:
        """A console URL in the organization acted in (only values that are set). A `notice` is signed for this
        session, so that a page shows only notices the console wrote, never a crafted link's words."""
        params = {"org": self.auth.organization_id, **{k: v for k, v in query.items() if v not in (None, "")}}
        if params.get("notice"):
            params["ns"] = self._notice_signature(str(params["notice"]))
        return f"{path}?{urlencode(params)}"

    def notice(self, request: Request) -> str | None:
        """The notice of the link that brought this person here, if the console signed it for this session."""
        text, signature = request.query_params.get("notice"), request.query_params.get("ns", "")
        return text if text and same_secret(signature, self._notice_signature(text)) else None

    def _notice_signature(self, text: str) -> str:
        return hmac.new(self.notice_key, text.encode(), hashlib.sha256).hexdigest()[:32]

    async def call(self, request: Request, coordinate: str, arguments: dict[str, Any]) -> Any:
        """Dispatch one handler as this person; a refusal is raised as the PrismError the API would answer."""
        return await dispatch_as(request, self.auth, DOOR, coordinate, arguments)


async def dispatch_as(request: Request, auth: AuthContext, door: str, coordinate: str,
                      arguments: dict[str, Any]) -> Any:
    """One handler (`mega/app/entity/operation`) through the dispatcher as `auth`, from a page or endpoint of
    `door`: RBAC, governance and the ledger entry as for an API call; a refusal is raised as its PrismError."""
    mega, app, entity, operation = coordinate.split("/")
    call = Call(tool_name=tool_name(mega), door=door, arguments=arguments, app=app, entity=entity,
                operation=operation, request_id=request_context(request.scope).request_id)
    _, result = await request.app.state.dispatcher.dispatch(auth, call)
    return result


def browser_caller(request: Request, user: User, membership: MembershipRow,
                   organizations: list[OrganizationChoice]) -> ConsoleCaller:
    """The signed-in browser session acting in one organization (the console, the key dashboard)."""
    web = browser_session(request)
    auth = person_context(user, membership, credential_kind="console",
                          credential_id=session_credential(web, "console"), key_name="Console",
                          signed_in_at=datetime.fromtimestamp(web.issued_at, UTC))
    return ConsoleCaller(user, auth, organizations, notice_key(request))


async def console_caller(request: Request, user: User) -> ConsoleCaller:
    """The caller for a signed-in user on this tenant host; 404 elsewhere, 403 without a membership here."""
    host = host_of(request)
    if host.kind != "tenant" or host.subdomain is None:
        raise NotATenantHost("the console is on each tenant's own host (<tenant>.<base domain>/console/)")
    async with request.app.state.db.read() as session:
        rows = (await session.execute(memberships(user).where(Tenant.subdomain == host.subdomain))).all()
    if not rows:
        raise PermissionDenied(f"{user.email} belongs to no organization of this tenant", code="no_organization")
    wanted = request.query_params.get("org")
    row = next((r for r in rows if r.id == wanted), None) if wanted else rows[0]
    if row is None:
        raise NotFound("organization not found among your organizations", code="organization_not_found")
    return browser_caller(request, user, row, [OrganizationChoice(r.id, r.name, r.role) for r in rows])


def notice_key(request: Request) -> bytes:
    """The key notices in this browser session's links are signed with (ConsoleCaller.link)."""
    return hmac.new(derived_key(request.app.state.settings, "console-notice"),
                    browser_session(request).csrf_token.encode(), hashlib.sha256).digest()
