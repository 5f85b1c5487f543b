"""Webhooks (/console/webhooks/): create, edit, rotate the secret, send a test event, see the deliveries and
resend one, each a dispatched call (config_manage/governance/webhook|webhook_delivery/...).

A button appears only for the roles whose permission its handler needs. The signing secret made by create or
rotate is shown once, on the page answering the form, even when the webhooks cannot be listed or read then (a
busy database: the page says so); it is never put in a link, a notice or the session.
Custom headers and filters are set through the API (the console shows their names).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller
from prism.console.pages import number_field, page, signed_in
from prism.errors import PrismError
from prism.events.catalog import EVENT_TYPES
from prism.web.browser import read_form, redirect

PATH = "/console/webhooks/"
HOOK = "config_manage/governance/webhook"
DELIVERY = "config_manage/governance/webhook_delivery"
PAGE_SIZE = 20
EVENTS = tuple(e.event_type for e in EVENT_TYPES)


def _page_number(request: Request) -> int:
    return number_field("page", request.query_params.get("page", "1"), meaning="a whole number from 1", least=1)


def _levers(caller: ConsoleCaller, request: Request) -> dict[str, bool]:
    return {f"may_{op}": caller.may(f"{HOOK}/{op}", request) for op in ("create", "update", "delete")}


async def _show_list(request: Request, caller: ConsoleCaller, *, status: int = 200, error: str | None = None,
                     secret_of: dict[str, Any] | None = None, form: dict[str, str] | None = None) -> Response:
    # A role may create (or rotate) without `governance.view_webhook`: the page still shows the secret, once.
    listed, unlisted = None, None
    if caller.may(f"{HOOK}/list", request):
        try:
            listed = await caller.call(request, f"{HOOK}/list", {"page": 1, "page_size": 100})
        except PrismError as exc:  # a secret just made is committed: it must still be shown, once
            unlisted = f"{exc.message} ({exc.code})"
    return page("console_webhooks.html", request, caller, PATH, status=status, error=error,
                notice=caller.notice(request), hooks=listed, unlisted=unlisted, events=EVENTS, secret_of=secret_of,
                form=form or {}, chosen=[e for e in EVENTS if (form or {}).get(f"event:{e}")],
                **_levers(caller, request))


async def _show_hook(request: Request, caller: ConsoleCaller, *, status: int = 200, error: str | None = None,
                     secret_of: dict[str, Any] | None = None) -> Response:
    webhook_id = request.path_params["webhook_id"]
    try:
        number = _page_number(request)
        hook = await caller.call(request, f"{HOOK}/read", {"id": webhook_id})
        deliveries = await caller.call(request, f"{DELIVERY}/list", {"webhook_id": webhook_id, "page": number,
                                                                      "page_size": PAGE_SIZE})
    except PrismError as exc:
        if secret_of is not None:  # the secret just rotated is committed: shown once, whatever cannot be read
            return await _show_list(request, caller, status=status, secret_of=secret_of,
                                    error=f"The webhook cannot be read right now: {exc.message} ({exc.code})")
        return page("console_webhooks.html", request, caller, PATH, status=exc.status,
                    error=f"{exc.message} ({exc.code})", hooks=None, events=EVENTS, form={}, chosen=[])
    return page("console_webhook.html", request, caller, PATH, status=status, error=error,
                notice=caller.notice(request), hook=hook, deliveries=deliveries, events=EVENTS,
                secret_of=secret_of, **_levers(caller, request))


def _fields(form: dict[str, str]) -> dict[str, Any]:
    """The edited fields as handler arguments (the handler validates them)."""
    return {"name": form.get("name", ""), "url": form.get("url", "").strip(),
            "description": form.get("description", ""), "events": [e for e in EVENTS if form.get(f"event:{e}")]}


@signed_in
async def overview(request: Request, caller: ConsoleCaller) -> Response:
    return await _show_list(request, caller)


@signed_in
async def create(request: Request, caller: ConsoleCaller) -> Response:
    form: dict[str, str] = {}
    try:
        form = await read_form(request)
        made = await caller.call(request, f"{HOOK}/create", _fields(form))
    except PrismError as exc:
        return await _show_list(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})", form=form)
    return await _show_list(request, caller, status=201, secret_of=made)


@signed_in
async def detail(request: Request, caller: ConsoleCaller) -> Response:
    return await _show_hook(request, caller)


async def _act(request: Request, caller: ConsoleCaller, coordinate: str, arguments: dict[str, Any],
               notice: str) -> Response:
    webhook_id = request.path_params["webhook_id"]
    try:
        form = await read_form(request)
        if coordinate.endswith("/update"):
            arguments = {**arguments, **_fields(form), "is_active": bool(form.get("is_active"))}
        await caller.call(request, coordinate, arguments)
    except PrismError as exc:
        return await _show_hook(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})")
    if coordinate.endswith("/delete"):
        return redirect(request, caller.link(PATH, notice=notice))
    return redirect(request, caller.link(f"{PATH}{webhook_id}/", notice=notice))


@signed_in
async def update(request: Request, caller: ConsoleCaller) -> Response:
    return await _act(request, caller, f"{HOOK}/update", {"id": request.path_params["webhook_id"]}, "Saved.")


@signed_in
async def rotate(request: Request, caller: ConsoleCaller) -> Response:
    try:
        await read_form(request)
        rotated = await caller.call(request, f"{HOOK}/rotate_secret", {"id": request.path_params["webhook_id"]})
    except PrismError as exc:
        return await _show_hook(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})")
    if not caller.may(f"{HOOK}/read", request):  # the new secret is shown once, whatever else may be shown
        return await _show_list(request, caller, secret_of=rotated)
    return await _show_hook(request, caller, secret_of=rotated)


@signed_in
async def send_test(request: Request, caller: ConsoleCaller) -> Response:
    return await _act(request, caller, f"{HOOK}/test", {"id": request.path_params["webhook_id"]},
                      "Test event queued: it appears in the deliveries once sent.")


@signed_in
async def resend(request: Request, caller: ConsoleCaller) -> Response:
    return await _act(request, caller, f"{DELIVERY}/resend", {"webhook_id": request.path_params["webhook_id"],
                                                              "id": request.path_params["delivery_id"]},
                      "Delivery queued again.")


@signed_in
async def remove(request: Request, caller: ConsoleCaller) -> Response:
    return await _act(request, caller, f"{HOOK}/delete", {"id": request.path_params["webhook_id"]},
                      "Webhook deleted.")
