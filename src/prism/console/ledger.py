"""Decisions and the ledger (/console/ledger/): entries by filter, one entry, the log's verification, export.

Every read is a dispatched call to the ledger API (audit_query/ledger/...), with the same filters; an export
is the export handler's text sent as a download. The export link is shown only to roles holding
`ledger.export_entry`.

Verification: `GET /console/ledger/?verify=quick` checks the entries after the latest kept checkpoint (cheap,
whatever `verify` says); the whole log is checked only by `POST /console/ledger/` with the page's CSRF
token. A link from another site carries the session cookie on a top-level GET (SameSite=Lax), so a GET must not
start work that reads the organization's whole log.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.console.caller import ConsoleCaller
from prism.console.pages import number_field, page, refusal, signed_in
from prism.errors import InvalidArguments, NotFound, PrismError
from prism.kit.numbers import whole_number
from prism.web.browser import read_form, security_headers

PATH = "/console/ledger/"
BASE = "audit_query/ledger"
DECISIONS = "audit_query/governance/decision/list"
TEXT_FILTERS = ("actor", "credential_id", "persona_id", "ai_system_id", "coordinate", "door")
TIME_FILTERS = ("since", "until")
NUMBER_FILTERS = ("seq_from", "seq_to")
OUTCOMES = ("allowed", "refused", "replayed")
QUICK, WHOLE = "latest_checkpoint", "first_entry"  # where the log's verification starts


def _filters(request: Request) -> tuple[dict[str, Any], dict[str, str]]:
    """The handler's arguments from the query string, and the values to show back in the form. Times from the
    form's datetime-local fields are UTC (the page says so); a time with its zone is taken as sent."""
    q = request.query_params
    shown = {name: q.get(name, "").strip() for name in (*TEXT_FILTERS, *TIME_FILTERS, *NUMBER_FILTERS, "outcome")}
    arguments: dict[str, Any] = {k: v for k, v in shown.items() if v and k in TEXT_FILTERS}
    for name in TIME_FILTERS:
        value = shown[name]
        if value:
            has_zone = value.endswith("Z") or "+" in value[10:] or "-" in value[10:]
            arguments[name] = value if has_zone else value + "Z"
    for name in NUMBER_FILTERS:
        if shown[name]:
            arguments[name] = number_field(name, shown[name])
    if shown["outcome"]:
        arguments["outcome"] = shown["outcome"]
    return arguments, shown


async def _decisions(request: Request, caller: ConsoleCaller, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """The latest governance decisions (calls of credentials tied to an AI system), for the same AI system and
    outcome when those filters are set; none for a role that may not list them."""
    if not caller.may(DECISIONS, request):
        return []
    wanted: dict[str, Any] = {"page_size": 10}
    if "ai_system_id" in arguments:
        wanted["ai_system_id"] = arguments["ai_system_id"]
    if arguments.get("outcome") in ("allowed", "refused"):
        wanted["decision"] = "ALLOW" if arguments["outcome"] == "allowed" else "BLOCK"
    items: list[dict[str, Any]] = (await caller.call(request, DECISIONS, wanted))["items"]
    return items


def _page_number(request: Request) -> int:
    return number_field("page", request.query_params.get("page", "1"), meaning="a whole number from 1", least=1)


@signed_in
async def entries(request: Request, caller: ConsoleCaller) -> Response:
    return await _ledger_page(request, caller, QUICK if request.query_params.get("verify") else None)


@signed_in
async def verify_whole_log(request: Request, caller: ConsoleCaller) -> Response:
    try:
        await read_form(request)
    except PrismError as exc:
        return refusal(request, exc)
    return await _ledger_page(request, caller, WHOLE)


async def _ledger_page(request: Request, caller: ConsoleCaller, verify_from: str | None) -> Response:
    """The entries of the filters in the query string, and the log's verification from `verify_from`
    (QUICK, WHOLE, or None for none)."""
    context: dict[str, Any] = {"outcomes": OUTCOMES, "may_export": caller.may(f"{BASE}/entry/export", request),
                               "may_verify": caller.may(f"{BASE}/log/verify", request)}
    status = 200
    try:
        arguments, shown = _filters(request)
        number = _page_number(request)
    except PrismError as exc:
        arguments, shown, number, status, context["error"] = {}, {}, 1, exc.status, exc.message
    context["shown"] = shown
    try:
        listed = await caller.call(request, f"{BASE}/entry/list", {**arguments, "page": number, "page_size": 25})
        context["decisions"] = await _decisions(request, caller, arguments)
        if verify_from is not None:
            context["verification"] = await caller.call(request, f"{BASE}/log/verify", {"start": verify_from})
    except PrismError as exc:
        listed, status, context["error"] = {"items": [], "total": 0, "page": 1, "page_size": 25}, exc.status, (
            f"{exc.message} ({exc.code})")
    query = {k: v for k, v in shown.items() if v}
    context.update(listed=listed, query=query,
                   previous_link=caller.link(PATH, **query, page=number - 1) if number > 1 else None,
                   next_link=(caller.link(PATH, **query, page=number + 1)
                              if number * listed["page_size"] < listed["total"] else None))
    return page("console_ledger.html", request, caller, PATH, status=status, **context)


@signed_in
async def entry(request: Request, caller: ConsoleCaller) -> Response:
    key = request.path_params["key"]
    kind, _, given = key.partition("-")
    position = whole_number(given) if kind == "seq" else None
    if not (kind == "id" and given) and position is None:
        return refusal(request, InvalidArguments("an entry is /console/ledger/id-<id>/ or /console/ledger/seq-<n>/"))
    try:
        entry_id = given
        if position is not None:  # a position: the entry there, found through the list's own filter
            found = await caller.call(request, f"{BASE}/entry/list", {"seq_from": position, "seq_to": position})
            if not found["items"]:
                raise NotFound(f"no ledger entry at position {position}", code="not_found")
            entry_id = found["items"][0]["id"]
        shown = await caller.call(request, f"{BASE}/entry/read", {"id": entry_id})
    except PrismError as exc:
        return page("console_entry.html", request, caller, PATH, status=exc.status, entry=None,
                    error=f"{exc.message} ({exc.code})")
    return page("console_entry.html", request, caller, PATH, entry=shown)


@signed_in
async def export(request: Request, caller: ConsoleCaller) -> Response:
    fmt = request.query_params.get("format", "jsonl")
    try:
        arguments, _ = _filters(request)
        exported = await caller.call(request, f"{BASE}/entry/export", {**arguments, "format": fmt})
    except PrismError as exc:
        return refusal(request, exc)
    name = f"ledger-{exported['first_seq'] or 0}-{exported['last_seq'] or 0}.{fmt}"
    headers = {**security_headers(request.app.state.settings), "Content-Disposition": f'attachment; filename="{name}"'}
    if exported["next_seq_from"] is not None:
        headers["X-Prism-Next-Seq-From"] = str(exported["next_seq_from"])
    return Response(exported["content"], media_type=exported["media_type"], headers=headers)
