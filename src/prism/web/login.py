"""The browser login page, on every host: GET/POST /login/?next=..., POST /logout/.

A successful sign-in rotates the session cookie and returns to `next` (a relative path only). Failed
attempts count towards the address lockout; once the address is locked out every attempt is refused 429, the
right password too (prism.edge.lockout).
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from prism.edge.doors import PAGE
from prism.edge.lockout import secret_attempt
from prism.errors import PrismError
from prism.identity.passwords import password_matches
from prism.identity.service import get_user
from prism.web.browser import read_form, redirect, render, safe_next, sign_in, sign_out, signed_in_user

BAD_CREDENTIALS = "Wrong email or password."


async def login_page(request: Request) -> Response:
    next_path = safe_next(request.query_params.get("next"))
    # The same check as every page that needs a person: a cookie that merely names one (whose sessions ended
    # since) would send them back to a page that sends them here, until the cookie expired.
    if request.query_params.get("switch") is None and await signed_in_user(request) is not None:
        return redirect(request, next_path)
    return render(request, "login.html", {"next": next_path})


async def login_submit(request: Request) -> Response:
    try:
        form = await read_form(request)
    except PrismError as exc:
        return render(request, "login.html", {"next": "/", "error": exc.message}, status=exc.status)
    next_path = safe_next(form.get("next"))
    email = form.get("email", "").strip()
    context = {"next": next_path, "email": email}
    try:
        async with secret_attempt(request.scope) as attempt:  # counted before the password is checked
            async with request.app.state.db.read() as session:
                user = await get_user(session, email) if email else None
            password_ok = await password_matches(user.password_hash if user else None, form.get("password", ""),
                                                 request.app.state.settings)
            if user is None or not password_ok or not user.is_active:
                await attempt.failed()
                return render(request, "login.html", {**context, "error": BAD_CREDENTIALS}, status=401)
            await attempt.succeeded()
    except PrismError as exc:  # locked out (429), the lockout cannot be checked or the hashing is full (503)
        return PAGE.page(exc, request.scope)
    sign_in(request, user.id)
    return redirect(request, next_path)


async def logout(request: Request) -> Response:
    try:
        form = await read_form(request)
    except PrismError as exc:
        return render(request, "message.html", {"heading": "Sign-out refused", "message": exc.message},
                      status=exc.status)
    await sign_out(request)
    return redirect(request, "/login/?" + urlencode({"next": safe_next(form.get("next"))}))
