"""Reading what a client sent: the host, the credential, a JSON body — each failure a PrismError."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from prism.auth.context import AuthContext
from prism.errors import BadRequest, PrismError
from prism.ratelimit.guard import authenticate_limited
from prism.tenancy.hosts import HostInfo, classify_host

MAX_BODY_BYTES = 1024 * 1024


class PayloadTooLarge(PrismError):
    code, status = "payload_too_large", 413


def host_of(request: Request) -> HostInfo:
    return classify_host(request.headers.get("host", ""), request.app.state.settings.base_domain)


async def authenticate(request: Request) -> AuthContext:
    # Through the rate-limit guard: lockout, failed-credential counting, the caller's per-user tier.
    return await authenticate_limited(request, host_of(request))


async def _read_capped(request: Request) -> bytes:
    """The body, refusing it as soon as it grows past the cap (a body without Content-Length may stream)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise PayloadTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, *, required: bool = True) -> Any:
    """The body as JSON; an empty body is None when not required."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")
    body = await _read_capped(request)
    if not body.strip():
        if required:
            raise BadRequest("request body is required (JSON object)", code="missing_body")
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", code="invalid_json") from None


async def read_json_object(request: Request, *, required: bool = True) -> dict[str, Any]:
    value = await read_json(request, required=required)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("body must be a JSON object", code="invalid_body")
    return value
