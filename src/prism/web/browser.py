"""Server-rendered browser pages: templates, the signed session cookie, CSRF, security headers.

Every Prism page a person sees (login, OAuth consent, key dashboard, webhook admin) is built from these:

- ``render(request, "page.html", {...}, status=200)`` renders ``src/prism/templates/page.html`` (autoescaped;
  templates extend ``base.html``) and returns an HTMLResponse carrying the security headers (not frameable,
  ``no-store``, strict CSP with ``form-action 'self'``, HSTS under https: ``security_headers``) and, when
  needed, a fresh session cookie. Every template gets ``csrf_token``,
  ``user_id`` and ``request``.
- ``redirect(request, url)`` is a 303 with the same headers and cookie handling.
- ``browser_session(request)`` is the visitor's session: ``user_id`` (None when signed out) and ``csrf_token``.
  The cookie is host-only (each tenant host has its own), HttpOnly, SameSite=Lax, Secure and named with the
  ``__Host-`` prefix under https (``session_cookie_name``), and
  signed with a key derived from the master secret (``prism.kit.secret``); a forged or expired cookie reads
  as a new anonymous session.
- ``await signed_in_user(request)`` is the active ``User`` or None; pages that need one answer
  ``redirect(request, login_url(request))`` otherwise. A session that no longer counts (signed out elsewhere,
  new password, user deactivated) is replaced by an anonymous one there and then.
- ``await read_form(request)`` reads a urlencoded form (size-capped) and checks its ``csrf_token`` field
  against the session (``CsrfRejected``, 403, otherwise). Every state-changing form posts ``csrf_token``:
  ``<input type="hidden" name="csrf_token" value="{{ csrf_token }}">``.
- ``sign_in(request, user_id)`` / ``sign_out(request)`` rotate the session (a new CSRF token too, so a token
  seen before login is worthless after it); the next ``render``/``redirect`` sets the cookie.
- ``safe_next(value)`` keeps only same-site relative paths, for ``?next=`` parameters.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from sqlalchemy import select, update
from starlette.requests import Request, cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response

from prism.config import Settings
from prism.errors import BadRequest, PrismError
from prism.kit.nul import refuse_nul_in_form
from prism.kit.secret import derived_key, same_secret
from prism.kit.timeutil import utcnow
from prism.models import User
from prism.web.requests import declared_length, read_body

SESSION_COOKIE = "prism_session"
# Under https the cookie carries the __Host- prefix: the browser then accepts it only Secure, with Path=/ and no
# Domain, so no other subdomain of the base domain (another tenant's host included) can set or shadow it.
SECURE_SESSION_COOKIE = "__Host-" + SESSION_COOKIE
# Strict-Transport-Security under https: a year, the usual value; each host is covered on its own (no
# includeSubDomains: see docs/oauth.md "Browser pages").
HSTS_SECONDS = 365 * 24 * 3600
# No form of Prism's has near this many fields (the console's largest lists the event types); a body of up to
# 1 MiB could hold half a million.
MAX_FORM_FIELDS = 1_000
CSP = ("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; script-src 'self'; "
       "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
_PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "X-Content-Type-Options": "nosniff",
    # Pages carry OAuth parameters in their URLs; never hand them to another site.
    "Referrer-Policy": "no-referrer",
}


class CsrfRejected(PrismError):
    code, status = "csrf_failed", 403


@dataclass(frozen=True, slots=True)
class BrowserSession:
    user_id: str | None
    csrf_token: str
    issued_at: float  # seconds since the epoch, to the millisecond
    fresh: bool  # not read from the request: the response must set the cookie


@lru_cache(maxsize=1)
def templates() -> Environment:
    return Environment(loader=PackageLoader("prism", "templates"), autoescape=select_autoescape(default=True),
                       auto_reload=False)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(settings: Settings, payload: str) -> str:
    return _b64(hmac.new(derived_key(settings, "browser-session"), payload.encode(), hashlib.sha256).digest())


def _encode(settings: Settings, session: BrowserSession) -> str:
    payload = _b64(orjson.dumps({"u": session.user_id, "c": session.csrf_token, "t": round(session.issued_at * 1000)}))
    return f"{payload}.{_signature(settings, payload)}"


def _decode(settings: Settings, cookie: str) -> BrowserSession | None:
    payload, _, signature = cookie.partition(".")
    if not payload or not same_secret(signature, _signature(settings, payload)):
        return None
    try:
        data = orjson.loads(_unb64(payload))
        user_id, csrf, issued = data["u"], data["c"], int(data["t"]) / 1000  # milliseconds in the cookie
    except (ValueError, KeyError, TypeError):
        return None
    if time.time() - issued > settings.browser_session_seconds or not isinstance(csrf, str):
        return None
    return BrowserSession(user_id if isinstance(user_id, str) else None, csrf, issued, fresh=False)


def session_cookie_name(settings: Settings) -> str:
    """The session cookie's name: `__Host-prism_session` under https, `prism_session` otherwise (a browser refuses
    a __Host- cookie that is not Secure). A cookie of the other name is not read: after a deployment moves to
    https its people sign in once more."""
    return SECURE_SESSION_COOKIE if settings.public_scheme == "https" else SESSION_COOKIE


def security_headers(settings: Settings, *, forms_end_at: str | None = None) -> dict[str, str]:
    """The headers of every page and console file. A page's forms may be sent only to this host (CSP form-action,
    which Chromium applies to every redirect after the submission too); `forms_end_at` is a URL elsewhere that a
    form's answer redirects to (the OAuth consent page's client), allowed as well. Under https, HSTS."""
    extra = form_action_source(forms_end_at) if forms_end_at else None
    headers = {**_PAGE_HEADERS, "Content-Security-Policy": f"{CSP} {extra}" if extra else CSP}
    if settings.public_scheme == "https":
        headers["Strict-Transport-Security"] = f"max-age={HSTS_SECONDS}"
    return headers


def form_action_source(url: str) -> str | None:
    """The CSP source that lets a submission end at `url`: its origin (paths are not compared after a redirect),
    or, for a private-use scheme (`cursor://...`, `com.example.app:/cb`), the scheme. None for a URL that cannot be
    written as a source without widening it (a wildcard, a separator: registration refuses those already)."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname or ""
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
        return None
    if scheme not in ("http", "https"):
        return f"{scheme}:"
    if not re.fullmatch(r"[a-z0-9.-]+|[0-9a-f:.]+", host):
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    shown_host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown_host}" + (f":{port}" if port is not None else "")


def signed_in_user_id(settings: Settings, cookie_header: str | None) -> str | None:
    """The user a request's session cookie says is signed in: its signature and age checked, nothing read from
    the database (the edge counts a signed-in reader's requests per user with it; the page checks the user)."""
    cookie = cookie_parser(cookie_header).get(session_cookie_name(settings)) if cookie_header else None
    session = _decode(settings, cookie) if cookie else None
    return session.user_id if session is not None else None


def _new_session(user_id: str | None) -> BrowserSession:
    return BrowserSession(user_id, secrets.token_urlsafe(32), round(time.time(), 3), fresh=True)


def session_credential(session: BrowserSession, kind: str) -> str:
    """The credential id a browser session's dispatched calls are recorded under: `<kind>:` and a digest of its
    CSRF token, which names one sign-in in the ledger and reveals nothing of it."""
    return f"{kind}:" + hashlib.sha256(session.csrf_token.encode()).hexdigest()[:28]


def browser_session(request: Request) -> BrowserSession:
    """The visitor's session (read once per request); a new anonymous one when there is none."""
    current: BrowserSession | None = getattr(request.state, "browser_session", None)
    if current is None:
        cookie = request.cookies.get(session_cookie_name(request.app.state.settings))
        current = (_decode(request.app.state.settings, cookie) if cookie else None) or _new_session(None)
        request.state.browser_session = current
    return current


def _finish(request: Request, response: Response, *, forms_end_at: str | None = None) -> Response:
    settings: Settings = request.app.state.settings
    response.headers.update(security_headers(settings, forms_end_at=forms_end_at))
    session = browser_session(request)
    if session.fresh:
        response.set_cookie(session_cookie_name(settings), _encode(settings, session),
                            max_age=settings.browser_session_seconds, path="/", httponly=True, samesite="lax",
                            secure=settings.public_scheme == "https")
    return response


def render(request: Request, template: str, context: dict[str, Any] | None = None, *,
           status: int = 200, forms_end_at: str | None = None) -> Response:
    """The page; `forms_end_at`: see `security_headers`."""
    session = browser_session(request)
    values = {"request": request, "csrf_token": session.csrf_token, "user_id": session.user_id,
              **(context or {})}
    html = templates().get_template(template).render(values)
    return _finish(request, HTMLResponse(html, status_code=status), forms_end_at=forms_end_at)


def redirect(request: Request, url: str, *, status: int = 303) -> Response:
    return _finish(request, RedirectResponse(url, status_code=status))


def sign_in(request: Request, user_id: str) -> None:
    """Mark the session signed in; the next `render`/`redirect` sets the rotated cookie."""
    request.state.browser_session = _new_session(user_id)


async def sign_out(request: Request) -> None:
    """End the person's browser sessions: this one, and every copy of its cookie (a session is a signed cookie,
    valid until it expires unless the person's `sessions_ended_at` says otherwise). Their other browsers are
    signed out too."""
    user_id = browser_session(request).user_id
    request.state.browser_session = _new_session(None)
    if user_id is not None:
        async with request.app.state.db.write() as session:
            await session.execute(update(User).where(User.id == user_id).values(sessions_ended_at=utcnow()))


async def signed_in_user(request: Request) -> User | None:
    """The active user whose session this is, or None. A cookie naming a user who signed out since (in any
    browser), changed password, was deactivated or removed is replaced by a new anonymous session, which the
    next `render`/`redirect` sets: the login page then shows its form instead of sending the person back to
    the page that sent them there."""
    web = browser_session(request)
    if web.user_id is None:
        return None
    async with request.app.state.db.read() as session:
        user: User | None = (await session.execute(select(User).where(User.id == web.user_id))).scalar_one_or_none()
    if user is None or not user.is_active or not _still_current(web, user):
        request.state.browser_session = _new_session(None)
        return None
    return user


def _still_current(web: BrowserSession, user: User) -> bool:
    ended = user.sessions_ended_at
    return ended is None or web.issued_at >= round(ended.timestamp(), 3)


async def read_form(request: Request, *, check_csrf: bool = True, single_valued: bool = False) -> dict[str, str]:
    """A urlencoded form as a dict (last value wins, or, `single_valued`, a repeated field refused with 400
    `invalid_request`, as OAuth requires), its CSRF token checked against the session. A field holding NUL is
    refused, naming it (see prism.kit.nul)."""
    body = await read_body(request.receive, declared_length(request.scope))
    try:
        fields = parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True,
                           max_num_fields=MAX_FORM_FIELDS)
    except ValueError:  # what parse_qsl raises past max_num_fields
        raise BadRequest(f"a form has at most {MAX_FORM_FIELDS} fields", code="invalid_request") from None
    refuse_nul_in_form(fields)
    form = dict(fields)
    if single_valued and len(form) != len(fields):
        repeated = sorted(name for name, times in Counter(name for name, _ in fields).items() if times > 1)
        named = ", ".join(repeated[:10]) + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else "")
        raise BadRequest(f"parameters sent more than once: {named}", code="invalid_request")
    if check_csrf:
        sent = form.get("csrf_token", "")
        if not sent or not same_secret(sent, browser_session(request).csrf_token):
            raise CsrfRejected("the form expired or did not come from this site; reload the page and try again")
    return form


def safe_next(value: str | None, default: str = "/") -> str:
    """Only a relative path on this host: `/x?y`, never `//evil`, `/\\evil` or a scheme."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")) or any(c in value for c in "\r\n"):
        return default
    return value


def login_url(request: Request) -> str:
    """The login page, coming back to the current URL afterwards."""
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/login/?" + urlencode({"next": here})
