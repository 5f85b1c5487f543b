"""GET /.well-known/openapi.json: the developer descriptor on the portal host, the tenant descriptor elsewhere.

Discovery documents are exempt from rate limits (SPEC.md "Limits"): the edge checks a credential here against
the failed-authentication lockout but counts it in no tier (prism.edge.paths).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.auth.context import AuthContext
from prism.edge.context import request_context
from prism.edge.doors import PLAIN, door_routes
from prism.errors import PrismError, TenantNotFound
from prism.kit.lru import LRU
from prism.oauth.issuer import issuer_for
from prism.openapi.developer import developer_document, serialized
from prism.openapi.tenant import rendered, tenant_descriptor
from prism.web.requests import host_of

PATH = "/.well-known/openapi.json"
# Portal origins whose developer descriptor is kept: the port comes from the client's Host header (unless
# PRISM_PUBLIC_PORT pins it), so the least recently used origin makes way rather than memory growing.
ORIGINS_KEPT = 8


def routes() -> list[BaseRoute]:
    return door_routes(PATH, openapi_json, ["GET"], PLAIN)


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 13.1.2: weak comparison, a list of tags or `*`."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def accepts_gzip(request: Request) -> bool:
    for coding in request.headers.get("accept-encoding", "").split(","):
        name, _, params = coding.strip().partition(";")
        if name.strip().lower() == "gzip":
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


async def _answer(request: Request, etags: tuple[str, ...], body: Callable[[], Awaitable[bytes]],
                  cache_control: str, encoding: str | None = None) -> Response:
    """304 when the client holds this version in any representation (the body is then never produced),
    else the document; `etags[0]` names the representation sent."""
    headers = {"ETag": etags[0], "Cache-Control": cache_control, "Vary": "Authorization, Host, Accept-Encoding"}
    if any(etag_matches(request.headers.get("if-none-match"), etag) for etag in etags):
        return Response(status_code=304, headers=headers)
    if encoding:
        headers["Content-Encoding"] = encoding
    return Response(await body(), media_type="application/json", headers=headers)


def _caller(request: Request) -> AuthContext | None:
    """The caller when the request presents a credential (the full descriptor), None for the anonymous one."""
    context = request_context(request.scope)
    if context.auth is not None:
        return context.auth
    if context.headers.get("authorization") or isinstance(context.auth_error, TenantNotFound):
        return context.caller()  # raises: the credential was refused, or the tenant host is unknown
    return None


async def openapi_json(request: Request) -> Response:
    state = request.app.state
    if host_of(request).kind == "portal":
        # Built on first use (every route is mounted by then), once per portal origin.
        per_origin: LRU[str, tuple[bytes, str]] | None = getattr(state, "developer_descriptors", None)
        if per_origin is None:
            per_origin = state.developer_descriptors = LRU(ORIGINS_KEPT)
        origin = issuer_for(request)
        cached = per_origin.get(origin)
        if cached is None:
            cached = per_origin.put(origin, serialized(developer_document(request.app.routes, origin)))
        document, etag = cached

        async def developer_body() -> bytes:
            return document

        return await _answer(request, (etag,), developer_body, "public, no-cache")
    try:
        auth = _caller(request)
    except PrismError as exc:
        return PLAIN.response(exc, request.scope)
    built = await tenant_descriptor(state.registry, auth)
    origin = issuer_for(request)
    gzipped = accepts_gzip(request)
    etags = (built.etag(origin, gzipped=gzipped), built.etag(origin, gzipped=not gzipped))

    async def tenant_body() -> bytes:
        return await rendered(built, origin, gzipped=gzipped)

    return await _answer(request, etags, tenant_body, "private, no-cache" if auth is not None else "public, no-cache",
                         "gzip" if gzipped else None)
