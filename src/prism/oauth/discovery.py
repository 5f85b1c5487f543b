"""Discovery documents on every host; the issuer is built from the request host (prism.oauth.issuer)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.oauth.endpoints import CORS_HEADERS
from prism.oauth.issuer import MCP_PATH, issuer_for, port_suffix
from prism.oauth.schemas import ADVERTISED_APP_SCOPES, OFFLINE_ACCESS, PUBLISHED_AUTH_METHODS
from prism.registry.mega_tools import PLATFORM_SCOPES
from prism.tenancy.hosts import PORTAL_LABEL
from prism.web.responses import json_response

MCP_VERSION = "2025-03-26"
PLATFORM_SUPPORT = ["Claude Desktop", "ChatGPT", "Cursor"]
# Public documents: cacheable briefly, readable from any origin.
HEADERS = {**CORS_HEADERS, "Cache-Control": "public, max-age=300"}


def _endpoints(issuer: str) -> dict[str, str]:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/api/mcp/oauth/authorize/",
        "token_endpoint": f"{issuer}/api/mcp/oauth/token/",
        "userinfo_endpoint": f"{issuer}/api/mcp/oauth/userinfo/",
        "revocation_endpoint": f"{issuer}/api/mcp/oauth/revoke/",
        "registration_endpoint": f"{issuer}/api/mcp/oauth/register/",
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
    }


def _documentation(request: Request) -> str:
    """The developer portal, on the port the issuer names (PRISM_PUBLIC_PORT, else the one addressed)."""
    settings = request.app.state.settings
    return f"{settings.public_scheme}://{PORTAL_LABEL}.{settings.base_domain}{port_suffix(request)}/"


def authorization_server_metadata(request: Request) -> dict[str, Any]:
    issuer = issuer_for(request)
    return {
        **_endpoints(issuer),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": list(PUBLISHED_AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(PUBLISHED_AUTH_METHODS),
        "scopes_supported": [*PLATFORM_SCOPES, *ADVERTISED_APP_SCOPES, OFFLINE_ACCESS],
        "response_modes_supported": ["query"],
        "authorization_response_iss_parameter_supported": True,
        "client_id_metadata_document_supported": True,
        "mcp_version": MCP_VERSION,
        "service_documentation": _documentation(request),
        "mcp_sse_endpoint": issuer + MCP_PATH,
    }


async def oauth_authorization_server(request: Request) -> Response:
    return json_response(authorization_server_metadata(request), headers=HEADERS)


async def openid_configuration(request: Request) -> Response:
    issuer = issuer_for(request)
    endpoints = _endpoints(issuer)
    return json_response({
        **{k: endpoints[k] for k in ("issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint",
                                     "jwks_uri", "registration_endpoint", "revocation_endpoint")},
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "subject_types_supported": ["public"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": list(PUBLISHED_AUTH_METHODS),
        "scopes_supported": [*PLATFORM_SCOPES, *ADVERTISED_APP_SCOPES, OFFLINE_ACCESS],
        "claims_supported": ["sub", "email", "org"],
    }, headers=HEADERS)


async def jwks(request: Request) -> Response:
    keys = await request.app.state.authenticator.tokens.ring.jwks()
    return json_response({"keys": keys}, headers=HEADERS)


def protected_resource_metadata(request: Request, resource_path: str) -> dict[str, Any]:
    issuer = issuer_for(request)
    return {
        "resource": issuer + resource_path,
        "authorization_servers": [issuer],
        "scopes_supported": list(PLATFORM_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_signing_alg_values_supported": ["RS256", "HS256"],
        "resource_documentation": _documentation(request),
        "authentication_methods_supported": ["oauth2"],
        "mcp_version": MCP_VERSION,
        "platform_support": PLATFORM_SUPPORT,
        "mcp_sse_endpoint": issuer + MCP_PATH,
    }


async def oauth_protected_resource(request: Request) -> Response:
    return json_response(protected_resource_metadata(request, ""), headers=HEADERS)


async def oauth_protected_resource_mcp(request: Request) -> Response:
    return json_response(protected_resource_metadata(request, MCP_PATH), headers=HEADERS)
