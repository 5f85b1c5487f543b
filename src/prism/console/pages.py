"""What every console page shares: the signed-in caller, the layout's sections, refusals as pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller, console_caller
from prism.errors import InvalidArguments, PrismError
from prism.kit.numbers import whole_number
from prism.models import Membership, User
from prism.web.browser import login_url, redirect, render, signed_in_user


@dataclass(frozen=True, slots=True)
class Section:
    path: str
    label: str
    # The handlers the section's page is built on: a role that may call none of them would only be refused
    # there. Keys, webhooks and governance count their create forms too (a role may mint or create without
    # listing, and the page still serves it).
    handlers: tuple[str, ...]


SECTIONS = (
    Section("/console/oversight/", "Oversight inbox", ("governance_review/governance/oversight_request/list",)),
    Section("/console/ledger/", "Ledger", ("audit_query/ledger/entry/list",)),
    Section("/console/governance/", "Personas, AI systems, missions",
            tuple(f"{entity}/{operation}" for entity in ("config_manage/governance/persona",
                                                        "config_manage/governance/ai_system",
                                                        "mission_control/missions/mission")
                  for operation in ("list", "create"))),
    Section("/console/keys/", "API keys", ("config_manage/keys/key/list", "config_manage/keys/key/create")),
    Section("/console/webhooks/", "Webhooks", ("config_manage/governance/webhook/list",
                                               "config_manage/governance/webhook/create")),
    Section("/console/members/", "Members", ("config_manage/organization/member/list",
                                             "config_manage/organization/role/list")),
)
Page = Callable[[Request, ConsoleCaller], Awaitable[Response]]


def sections_for(caller: ConsoleCaller, request: Request) -> list[Section]:
    """The sections this person's role in the organization may use, in the navigation's order."""
    return [s for s in SECTIONS if any(caller.may(coordinate, request) for coordinate in s.handlers)]


def page(template: str, request: Request, caller: ConsoleCaller, current: str, *, status: int = 200,
         **context: Any) -> Response:
    return render(request, template, {"caller": caller, "sections": sections_for(caller, request),
                                      "current": current, **context}, status=status)


def number_field(name: str, raw: str, *, meaning: str = "a whole number", least: int = 0) -> int:
    """A number typed in a form or a link, or a 400 naming the field (shown on the page like a handler's
    refusal); the handler the number is for still checks its own bounds."""
    number = whole_number(raw)
    if number is None or number < least:
        raise InvalidArguments(f"{name}: {meaning}", details={"field": name})
    return number


def refusal(request: Request, exc: PrismError) -> Response:
    return render(request, "message.html", {"heading": "Request refused", "error": exc.code,
                                            "message": exc.message}, status=exc.status)


def _login_to_section(request: Request) -> str:
    """The login page for a form posted after the session ended: a redirect cannot post it again, so after
    signing in the person lands on the form's section (`/console/keys/`, in the same organization)."""
    section = "/".join(request.url.path.split("/")[:3]) + "/"
    org = request.query_params.get("org")
    return "/login/?" + urlencode({"next": section + (f"?{urlencode({'org': org})}" if org else "")})


def signed_in(endpoint: Page) -> Callable[[Request], Awaitable[Response]]:
    """The page for a signed-in member of an organization on this tenant host; the login page otherwise."""
    async def wrapped(request: Request) -> Response:
        user = await signed_in_user(request)
        if user is None:
            return redirect(request, login_url(request) if request.method == "GET" else _login_to_section(request))
        try:
            caller = await console_caller(request, user)
        except PrismError as exc:
            return refusal(request, exc)
        return await endpoint(request, caller)

    wrapped.__name__ = endpoint.__name__
    return wrapped


async def member_emails(session: AsyncSession, organization_id: str, user_ids: set[str | None]) -> dict[str, str]:
    """Emails of the organization's members among `user_ids`, to say who asked or decided (others: their id)."""
    ids = [i for i in user_ids if i]
    if not ids:
        return {}
    rows = await session.execute(select(User.id, User.email).join(Membership, Membership.user_id == User.id)
                                 .where(Membership.organization_id == organization_id, User.id.in_(ids)))
    return {user_id: email for user_id, email in rows}
