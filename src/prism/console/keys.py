"""Your API keys (/console/keys/): list, mint and revoke, each a dispatched call (config_manage/keys/key/...).

A revoked key is also dropped from this process's credential cache at once (`revoke_own_key`, which the key
dashboard uses too; other processes drop it within `PRISM_CREDENTIAL_CACHE_SECONDS`). A new key's plaintext is
shown once, on the page that answers the form, even when the keys cannot be listed then (a busy database: the
page says so instead of the list).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller
from prism.console.pages import number_field, page, signed_in
from prism.errors import PrismError
from prism.mcp_server.surfaces import SURFACES
from prism.registry.mega_tools import PLATFORM_SCOPES
from prism.web.browser import read_form, redirect

PATH = "/console/keys/"
KEYS = "config_manage/keys/key"


async def _show(request: Request, caller: ConsoleCaller, *, status: int = 200, error: str | None = None,
                notice: str | None = None, minted: dict[str, Any] | None = None) -> Response:
    # A role may mint without `keys.view_key`: the page still shows what was minted, once.
    may_list = caller.may(f"{KEYS}/list", request)
    listed: list[dict[str, Any]] = []
    unlisted = None
    if may_list:
        try:
            listed = (await caller.call(request, f"{KEYS}/list", {"page_size": 100}))["items"]
        except PrismError as exc:  # a key just minted is committed: its plaintext must still be shown, once
            unlisted = f"{exc.message} ({exc.code})"
    return page("console_keys.html", request, caller, PATH, status=status, error=error, notice=notice,
                keys=listed, unlisted=unlisted, scopes=PLATFORM_SCOPES, surfaces=SURFACES, minted=minted,
                may_create=caller.may(f"{KEYS}/create", request), may_revoke=caller.may(f"{KEYS}/revoke", request))


@signed_in
async def overview(request: Request, caller: ConsoleCaller) -> Response:
    return await _show(request, caller, notice=caller.notice(request))


def _expiry_days(form: dict[str, str]) -> int | None:
    days = form.get("expires_days", "").strip()
    return number_field("expires_days", days, meaning="a whole number of days, or empty for none") if days else None


@signed_in
async def mint(request: Request, caller: ConsoleCaller) -> Response:
    try:
        form = await read_form(request)
        minted = await caller.call(request, f"{KEYS}/create", {
            "name": form.get("name", ""), "scopes": [s for s in PLATFORM_SCOPES if form.get(s)],
            "expires_days": _expiry_days(form), "tool_surface": form.get("tool_surface") or None})
    except PrismError as exc:
        return await _show(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})")
    return await _show(request, caller, status=201, minted=minted)


@signed_in
async def revoke(request: Request, caller: ConsoleCaller) -> Response:
    try:
        await read_form(request)
        revoked = await revoke_own_key(request, caller, request.path_params["key_id"])
    except PrismError as exc:
        return await _show(request, caller, status=exc.status, error=f"{exc.message} ({exc.code})")
    return redirect(request, caller.link(PATH, notice=f"Key {revoked['prefix']} revoked."))


async def revoke_own_key(request: Request, caller: ConsoleCaller, key_id: str) -> dict[str, Any]:
    """Revoke one of the person's keys through the keys handler (here and on /keys/), then drop it from this
    process's credential cache: the revocation is committed, so the key is refused from the next request on."""
    revoked: dict[str, Any] = await caller.call(request, f"{KEYS}/revoke", {"id": key_id})
    request.app.state.authenticator.forget_key(revoked["prefix"])
    return revoked
