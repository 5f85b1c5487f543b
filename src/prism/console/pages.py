"""What every console page shares: the signed-in caller, the layout's sections, refusals as pages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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

SECTIONS = (("/console/oversight/", "Oversight inbox"), ("/console/ledger/", "Ledger"),
            ("/console/governance/", "Personas, AI systems, missions"), ("/console/keys/", "API keys"),
            ("/console/webhooks/", "Webhooks"), ("/console/members/", "Members"))
Page = Callable[[Request, ConsoleCaller], Awaitable[Response]]


def page(template: str, request: Request, caller: ConsoleCaller, current: str, *, status: int = 200,
         **context: Any) -> Response:
    return render(request, template, {"caller": caller, "sections": SECTIONS, "current": current, **context},
                  status=status)


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
