"""Every route of the authorization server, the discovery documents and the browser login page."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from prism.oauth import authorize, discovery, endpoints
from prism.web import login


def _both(path: str, endpoint: object, methods: list[str]) -> list[BaseRoute]:
    """The path with and without its trailing slash, answered directly (never a redirect)."""
    bare = path.rstrip("/")
    return [Route(bare, endpoint, methods=methods), Route(bare + "/", endpoint, methods=methods)]  # type: ignore[arg-type]


def _cors(path: str, endpoint: object, methods: list[str]) -> list[BaseRoute]:
    return [*_both(path, endpoint, methods), *_both(path, endpoint=endpoints.preflight, methods=["OPTIONS"])]


def routes() -> list[BaseRoute]:
    oauth = "/api/mcp/oauth"
    well_known = "/.well-known"
    return [
        *_both("/login/", login.login_page, ["GET"]),
        *_both("/login/", login.login_submit, ["POST"]),
        *_both("/logout/", login.logout, ["POST"]),
        *_cors(f"{oauth}/register/", endpoints.register, ["POST"]),
        *_both(f"{oauth}/authorize/", authorize.authorize_page, ["GET"]),
        *_both(f"{oauth}/authorize/", authorize.authorize_decision, ["POST"]),
        *_cors(f"{oauth}/token/", endpoints.token, ["POST"]),
        *_cors(f"{oauth}/revoke/", endpoints.revoke, ["POST"]),
        *_cors(f"{oauth}/userinfo/", endpoints.userinfo, ["GET", "POST"]),
        *_cors(f"{well_known}/oauth-authorization-server", discovery.oauth_authorization_server, ["GET"]),
        *_cors(f"{well_known}/openid-configuration", discovery.openid_configuration, ["GET"]),
        *_cors(f"{well_known}/jwks.json", discovery.jwks, ["GET"]),
        *_cors(f"{well_known}/oauth-protected-resource", discovery.oauth_protected_resource, ["GET"]),
        *_cors(f"{well_known}/oauth-protected-resource/api/mcp/sse", discovery.oauth_protected_resource_mcp,
               ["GET"]),
    ]
