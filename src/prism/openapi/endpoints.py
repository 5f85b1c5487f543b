"""GET /.well-known/openapi.json: the developer descriptor on the portal host, the tenant descriptor elsewhere.

Discovery documents are exempt from rate limits (SPEC.md "Limits"), so a credential here is checked
against the failed-authentication lockout but not counted in the caller's per-user tier.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from prism.auth.context import AuthContext
from prism.errors import PrismError, Unauthenticated
from prism.oauth.issuer import issuer_for
from prism.openapi.developer import developer_document, serialized
from prism.openapi.tenant import rendered, tenant_descriptor
from prism.ratelimit.guard import client_address, locked_out_error
from prism.web.requests import host_of
from prism.web.responses import error_headers, json_response

PATH = "/.well-known/openapi.json"


def routes() -> list[BaseRoute]:
    return [Route(PATH, openapi_json, methods=["GET"])]


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


async def _caller(request: Request) -> AuthContext | None:
    host = host_of(request)
    state = request.app.state
    authorization = request.headers.get("authorization")
    if not authorization:
        if host.kind == "tenant":
            await state.authenticator.require_tenant_host(host)
        return None
    address = client_address(request)
    left = await state.rate_limiter.locked_out(address)
    if left is not None:
        raise locked_out_error(address, left)
    try:
        auth: AuthContext = await state.authenticator.authenticate(authorization, host)
    except Unauthenticated:
        await state.rate_limiter.auth_failed(address)
        raise
    return auth


async def openapi_json(request: Request) -> Response:
    state = request.app.state
    if host_of(request).kind == "portal":
        # Built on first use (every route is mounted by then), once per portal origin.
        per_origin: dict[str, tuple[bytes, str]] | None = getattr(state, "developer_descriptors", None)
        if per_origin is None:
            per_origin = state.developer_descriptors = {}
        origin = issuer_for(request)
        cached = per_origin.get(origin)
        if cached is None:
            cached = per_origin[origin] = serialized(developer_document(request.app.routes, origin))
        document, etag = cached

        async def developer_body() -> bytes:
            return document

        return await _answer(request, (etag,), developer_body, "public, no-cache")
    try:
        auth = await _caller(request)
    except PrismError as exc:
        return json_response({"error": exc.code, "message": exc.message}, exc.status, error_headers(exc))
    built = await tenant_descriptor(state.registry, auth)
    origin = issuer_for(request)
    gzipped = accepts_gzip(request)
    etags = (built.etag(origin, gzipped=gzipped), built.etag(origin, gzipped=not gzipped))

    async def tenant_body() -> bytes:
        return await rendered(built, origin, gzipped=gzipped)

    return await _answer(request, etags, tenant_body, "private, no-cache" if auth is not None else "public, no-cache",
                         "gzip" if gzipped else None)
