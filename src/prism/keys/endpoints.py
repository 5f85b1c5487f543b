"""HTTP: API-key registration (JSON) and the key dashboard (browser pages)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.edge.context import request_context
from prism.edge.doors import PAGE, PLAIN, door_routes
from prism.errors import PrismError, Unauthenticated
from prism.keys import dashboard
from prism.keys.registration import check_credentials, parse_request, register_key
from prism.kit.ids import public_organization_id
from prism.kit.timeutil import iso
from prism.models import User
from prism.web.requests import host_of, read_json_object
from prism.web.responses import json_response

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _error(exc: PrismError, request: Request) -> Response:
    response = PLAIN.response(exc, request.scope)
    response.headers.update(NO_STORE)
    return response


async def register(request: Request) -> Response:
    db = request.app.state.db
    try:
        parsed = parse_request(await read_json_object(request))
        host = host_of(request)
        async with db.read() as session:
            user = await check_credentials(session, parsed.email, parsed.password)
        async with db.write() as session:
            current = await session.get(User, user.id)
            assert current is not None
            registered = await register_key(session, current, parsed, host=host)
            key, organization = registered.minted.key, registered.organization
            body = {
                "api_key": registered.minted.plaintext, "key_id": key.id, "key_prefix": key.lookup,
                "name": key.name, "scopes": key.scopes.split(), "tool_surface": key.tool_surface,
                "organization": public_organization_id(organization.id),
                "organization_name": organization.name, "expires_at": iso(key.expires_at),
            }
    except Unauthenticated as exc:
        await request.app.state.rate_limiter.auth_failed(request_context(request.scope).address)
        return _error(exc, request)
    except PrismError as exc:
        return _error(exc, request)
    return json_response(body, 201, NO_STORE)


def routes() -> list[BaseRoute]:
    return [
        *door_routes("/api/mcp/api-keys/register/", register, ["POST"], PLAIN),
        *door_routes(dashboard.DASHBOARD_PATH, dashboard.show, ["GET"], PAGE),
        *door_routes(dashboard.DASHBOARD_PATH, dashboard.mint, ["POST"], PAGE),
        *door_routes(dashboard.DASHBOARD_PATH + "{key_id}/revoke/", dashboard.revoke, ["POST"], PAGE),
    ]
