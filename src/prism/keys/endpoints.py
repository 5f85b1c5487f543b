"""HTTP: API-key registration (JSON) and the key dashboard (browser pages)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.console.caller import dispatch_as
from prism.console.keys import KEYS
from prism.edge.doors import PAGE, PASSWORD, door_routes
from prism.edge.lockout import secret_attempt
from prism.errors import PrismError
from prism.keys import dashboard
from prism.keys.registration import (
    BadCredentials,
    RegistrationRequest,
    check_credentials,
    key_arguments,
    parse_request,
    registrant,
    registration_organization,
)
from prism.kit.ids import public_organization_id
from prism.models import User
from prism.web.requests import host_of, read_json_object
from prism.web.responses import json_response

REGISTRATION_DOOR = "registration"
KEY_CREATE = f"{KEYS}/create"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _error(exc: PrismError, request: Request) -> Response:
    response = PASSWORD.response(exc, request.scope)
    response.headers.update(NO_STORE)
    return response


async def _registrant_user(request: Request, parsed: RegistrationRequest) -> User:
    """The person the email and password name, obeying the lockout (prism.edge.lockout): the attempt is counted
    before the password is checked, a wrong password is counted as a failure (429 once the address is locked out),
    and the right one is refused 429 if guesses locked the address while it was checked."""
    async with secret_attempt(request.scope) as attempt:
        try:
            user = await check_credentials(request.app.state.db, request.app.state.settings, parsed.email,
                                             parsed.password)
        except BadCredentials:
            await attempt.failed()
            raise
        await attempt.succeeded()
    return user


async def register(request: Request) -> Response:
    try:
        parsed = parse_request(await read_json_object(request))
        user = await _registrant_user(request, parsed)
        async with request.app.state.db.read() as session:
            organization = await registration_organization(session, user, parsed, host=host_of(request))
            auth = await registrant(session, user, organization)
        # The keys handler mints, as on the console: `keys.add_key` checked, a ledger entry written.
        key = await dispatch_as(request, auth, REGISTRATION_DOOR, KEY_CREATE, key_arguments(parsed))
        body = {
            "api_key": key["api_key"], "key_id": key["id"], "key_prefix": key["prefix"], "name": key["name"],
            "scopes": key["scopes"], "tool_surface": key["tool_surface"],
            "organization": public_organization_id(organization.id), "organization_name": organization.name,
            "expires_at": key["expires_at"],
        }
    except PrismError as exc:
        return _error(exc, request)
    return json_response(body, 201, NO_STORE)


def routes() -> list[BaseRoute]:
    return [
        *door_routes("/api/mcp/api-keys/register/", register, ["POST"], PASSWORD),
        *door_routes(dashboard.DASHBOARD_PATH, dashboard.show, ["GET"], PAGE),
        *door_routes(dashboard.DASHBOARD_PATH, dashboard.mint, ["POST"], PAGE),
        *door_routes(dashboard.DASHBOARD_PATH + "{key_id}/revoke/", dashboard.revoke, ["POST"], PAGE),
    ]
