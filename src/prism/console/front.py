"""The front page `/`: on a tenant host, the way to the console, the key dashboard and the descriptor; on the
portal host, the developer portal: the developer descriptor rendered as a page (server-side, so it reads
without JavaScript and with a screen reader), with links to the descriptor itself and the guide. Any other
host keeps answering 404: the platform host has no front page of its own.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.edge.doors import PLAIN
from prism.errors import NotFound
from prism.oauth.issuer import issuer_for
from prism.openapi.developer import developer_document
from prism.tenancy.hosts import PORTAL_LABEL
from prism.web.browser import render
from prism.web.requests import host_of

METHODS = ("get", "post", "put", "patch", "delete")
SWAGGER_UI_VERSION = "5.35.0"  # the swagger-ui-dist release in prism/console/static (NOTICE: docs/openapi.md)


def _portal_url(request: Request) -> str:
    settings = request.app.state.settings
    port = "" if settings.public_port in (None, 80, 443) else f":{settings.public_port}"
    if settings.public_port is None and request.url.port not in (None, 80, 443):
        port = f":{request.url.port}"
    return f"{settings.public_scheme}://{PORTAL_LABEL}.{settings.base_domain}{port}/"


def _operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The descriptor's operations grouped by their first tag, in the document's order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            tag = (operation.get("tags") or ["other"])[0]
            groups.setdefault(tag, []).append({
                "method": method.upper(), "path": path, "summary": operation.get("summary", ""),
                "description": operation.get("description", ""), "id": operation.get("operationId", ""),
                "secured": bool(operation.get("security", document.get("security")))})
    return [{"tag": tag, "operations": ops} for tag, ops in groups.items()]


async def front(request: Request) -> Response:
    host = host_of(request)
    if host.kind == "tenant":
        return render(request, "front_tenant.html", {"tenant": host.subdomain, "portal": _portal_url(request)})
    if host.kind == "portal":
        document = developer_document(request.app.routes, issuer_for(request))
        return render(request, "front_portal.html", {"info": document.get("info", {}),
                                                     "groups": _operations(document)})
    return PLAIN.response(NotFound(f"no route {request.url.path}"), request.scope)


async def api_reference(request: Request) -> Response:
    """The portal host's API reference: the developer descriptor rendered in the browser by the Swagger UI
    bundle vendored in prism/console/static (docs/openapi.md "The API reference page")."""
    if host_of(request).kind != "portal":
        return PLAIN.response(NotFound(f"no route {request.url.path}"), request.scope)
    return render(request, "front_api_reference.html", {"viewer_version": SWAGGER_UI_VERSION})
