"""Every route of the authorization server, the discovery documents and the browser login page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute

from prism.edge.doors import AUTHORIZE, OAUTH, PAGE, PLAIN, CorsDoor, Door, door_routes
from prism.oauth import authorize, discovery, endpoints, registration
from prism.web import login


def _cors(path: str, endpoint: Callable[..., Any], methods: list[str], door: Door) -> list[BaseRoute]:
    """The endpoint and its CORS preflight; every refusal of the path (its 405 too) carries the CORS headers."""
    cors = CorsDoor(door, endpoints.CORS_HEADERS)
    return [*door_routes(path, endpoint, methods, cors), *door_routes(path, endpoints.preflight, ["OPTIONS"], cors)]


def routes() -> list[BaseRoute]:
    oauth = "/api/mcp/oauth"
    well_known = "/.well-known"
    management = CorsDoor(OAUTH, registration.MANAGEMENT_CORS)
    return [
        *door_routes("/login/", login.login_page, ["GET"], PAGE),
        *door_routes("/login/", login.login_submit, ["POST"], PAGE),
        *door_routes("/logout/", login.logout, ["POST"], PAGE),
        *_cors(f"{oauth}/register/", endpoints.register, ["POST"], OAUTH),
        *door_routes(f"{oauth}/register/{{client_id}}", registration.manage, ["GET", "PUT", "DELETE"], management),
        *door_routes(f"{oauth}/register/{{client_id}}", registration.preflight, ["OPTIONS"], management),
        *door_routes(f"{oauth}/authorize/", authorize.authorize_page, ["GET"], AUTHORIZE),
        *door_routes(f"{oauth}/authorize/", authorize.authorize_decision, ["POST"], AUTHORIZE),
        *_cors(f"{oauth}/token/", endpoints.token, ["POST"], OAUTH),
        *_cors(f"{oauth}/revoke/", endpoints.revoke, ["POST"], OAUTH),
        *_cors(f"{oauth}/userinfo/", endpoints.userinfo, ["GET", "POST"], OAUTH),
        # MCP 2025-03-26 clients that find no metadata fall back to these paths at the origin: the same
        # endpoints, answered directly (a client may not follow a redirect of a POST).
        *door_routes("/authorize/", authorize.authorize_page, ["GET"], AUTHORIZE),
        *_cors("/token/", endpoints.token, ["POST"], OAUTH),
        *_cors("/register/", endpoints.register, ["POST"], OAUTH),
        *_cors(f"{well_known}/oauth-authorization-server", discovery.oauth_authorization_server, ["GET"], PLAIN),
        *_cors(f"{well_known}/openid-configuration", discovery.openid_configuration, ["GET"], PLAIN),
        *_cors(f"{well_known}/jwks.json", discovery.jwks, ["GET"], PLAIN),
        *_cors(f"{well_known}/oauth-protected-resource", discovery.oauth_protected_resource, ["GET"], PLAIN),
        *_cors(f"{well_known}/oauth-protected-resource/api/mcp/sse", discovery.oauth_protected_resource_mcp,
               ["GET"], PLAIN),
    ]
