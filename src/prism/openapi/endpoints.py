"""GET /.well-known/openapi.json: the developer descriptor on the portal host, the tenant descriptor elsewhere.

Discovery documents are exempt from rate limits (SPEC.md "Limits"): the edge checks a credential here against
the failed-authentication lockout but counts it in no tier (prism.edge.paths).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from prism.auth.context import AuthContext
from prism.edge.context import request_context
from prism.edge.doors import PLAIN, door_routes
from prism.errors import PrismError, TenantNotFound
from prism.kit.lru import LRU
from prism.oauth.issuer import issuer_for
from prism.openapi.developer import developer_document, serialized
from prism.openapi.tenant import tenant_descriptor
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


class PiecesResponse(Response):
    """A 200 whose body is sent as the given pieces, one message each: a kept document goes out as the bytes it
    is kept as, never joined with what follows it into a copy of the whole."""

    def __init__(self, pieces: tuple[bytes, ...], headers: Mapping[str, str], media_type: str) -> None:
        self.pieces = pieces
        super().__init__(None, headers={**headers, "Content-Length": str(sum(map(len, pieces)))},
                         media_type=media_type)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        last = len(self.pieces) - 1
        for index, piece in enumerate(self.pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": index < last})


def _answer(request: Request, etags: tuple[str, ...], pieces: Callable[[], tuple[bytes, ...]],
            cache_control: str, encoding: str | None = None) -> Response:
    """304 when the client holds this version in any representation (the body is then never produced),
    else the document; `etags[0]` names the representation sent."""
    headers = {"ETag": etags[0], "Cache-Control": cache_control, "Vary": "Authorization, Host, Accept-Encoding"}
    if any(etag_matches(request.headers.get("if-none-match"), etag) for etag in etags):
        return Response(status_code=304, headers=headers)
    if encoding:
        headers["Content-Encoding"] = encoding
    return PiecesResponse(pieces(), headers, "application/json")


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
        return _answer(request, (etag,), lambda: (document,), "public, no-cache")
    try:
        auth = _caller(request)
    except PrismError as exc:
        return PLAIN.response(exc, request.scope)
    built = await tenant_descriptor(state.registry, auth)
    origin = issuer_for(request)
    gzipped = accepts_gzip(request)
    etags = (built.etag(origin, gzipped=gzipped), built.etag(origin, gzipped=not gzipped))

    return _answer(request, etags, lambda: built.pieces(origin, gzipped=gzipped),
                   "private, no-cache" if auth is not None else "public, no-cache", "gzip" if gzipped else None)
