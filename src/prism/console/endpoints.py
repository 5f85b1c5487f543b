"""The console's routes, all on the page door (refusals render as pages), and its two static files."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, request_response

from prism.console import front, governance, keys, ledger, members, oversight, webhooks
from prism.console.caller import ConsoleCaller
from prism.console.pages import page, sections_for, signed_in
from prism.edge.doors import PAGE, Entrance, door_routes
from prism.errors import NotFound
from prism.web.browser import redirect, security_headers

HOME = "/console/"
CSS, JS, TEXT = "text/css; charset=utf-8", "text/javascript; charset=utf-8", "text/plain; charset=utf-8"
# The console's own two files, the portal's API reference script, and the vendored Swagger UI with its licences.
STATIC = {"console.css": CSS, "console.js": JS, "api-reference.js": JS, "api-reference.css": CSS,
          "swagger-ui.css": CSS,
          "swagger-ui-bundle.js": JS, "swagger-ui.LICENSE": TEXT, "swagger-ui.NOTICE": TEXT,
          "swagger-ui-bundle.js.LICENSE.txt": TEXT}


@lru_cache(maxsize=len(STATIC))
def _static(name: str) -> bytes:
    return files("prism.console").joinpath("static", name).read_bytes()


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        raise NotFound(f"no console file {name!r}")
    headers = {**security_headers(request.app.state.settings), "Cache-Control": "public, max-age=300"}
    headers.pop("Pragma")
    return Response(_static(name), media_type=STATIC[name], headers=headers)


@signed_in
async def home(request: Request, caller: ConsoleCaller) -> Response:
    """The first section the person's role in the organization may use (the oversight inbox for the seeded
    roles): a tenant's own role without the inbox's permission must not land on a refusal. A role that may
    use none gets a page saying so, with the organization switch and sign-out."""
    usable = sections_for(caller, request)
    if not usable:
        return page("console_no_section.html", request, caller, HOME)
    return redirect(request, caller.link(usable[0].path))


def routes() -> list[BaseRoute]:
    return [
        Route("/", Entrance(request_response(front.front), PAGE), methods=["GET"]),
        *door_routes("/api-reference/", front.api_reference, ["GET"], PAGE),
        *door_routes(HOME, home, ["GET"], PAGE),
        *door_routes("/console/static/{name}", static, ["GET"], PAGE),
        *door_routes(oversight.PATH, oversight.inbox, ["GET"], PAGE),
        *door_routes(oversight.PATH + "state/", oversight.state, ["GET"], PAGE),
        *door_routes(oversight.PATH + "{request_id}/decide/", oversight.decide, ["POST"], PAGE),
        *door_routes(ledger.PATH, ledger.entries, ["GET"], PAGE),
        *door_routes(ledger.PATH + "export/", ledger.export, ["GET"], PAGE),
        *door_routes(ledger.PATH, ledger.verify_whole_log, ["POST"], PAGE),
        *door_routes(ledger.PATH + "{key}/", ledger.entry, ["GET"], PAGE),
        *door_routes(keys.PATH, keys.overview, ["GET"], PAGE),
        *door_routes(keys.PATH, keys.mint, ["POST"], PAGE),
        *door_routes(keys.PATH + "{key_id}/revoke/", keys.revoke, ["POST"], PAGE),
        *door_routes(members.PATH, members.overview, ["GET"], PAGE),
        *door_routes(governance.PATH, governance.overview, ["GET"], PAGE),
        *door_routes(governance.PATH + "{kind}/", governance.create, ["POST"], PAGE),
        *door_routes(webhooks.PATH, webhooks.overview, ["GET"], PAGE),
        *door_routes(webhooks.PATH, webhooks.create, ["POST"], PAGE),
        *door_routes(webhooks.PATH + "{webhook_id}/", webhooks.detail, ["GET"], PAGE),
        *door_routes(webhooks.PATH + "{webhook_id}/", webhooks.update, ["POST"], PAGE),
        *door_routes(webhooks.PATH + "{webhook_id}/rotate/", webhooks.rotate, ["POST"], PAGE),
        *door_routes(webhooks.PATH + "{webhook_id}/test/", webhooks.send_test, ["POST"], PAGE),
        *door_routes(webhooks.PATH + "{webhook_id}/delete/", webhooks.remove, ["POST"], PAGE),
        *door_routes(webhooks.PATH + "{webhook_id}/deliveries/{delivery_id}/resend/", webhooks.resend, ["POST"], PAGE),
    ]
