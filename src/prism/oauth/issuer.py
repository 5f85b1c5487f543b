"""The issuer and public URLs of a host, built from configuration and the Host header (never X-Forwarded-*)."""

from __future__ import annotations

from starlette.requests import Request

from prism.config import Settings
from prism.oauth.errors import OAuthError
from prism.tenancy.hosts import split_host
from prism.web.requests import host_of

MCP_PATH = "/api/mcp/sse"
DEFAULT_PORTS = {"http": 80, "https": 443}


def issuer_for(request: Request) -> str:
    """`<PRISM_PUBLIC_SCHEME>://<host>[:port]`: the same string wherever it appears (metadata, iss, tokens).

    The port is PRISM_PUBLIC_PORT when set, else the one the client addressed.
    """
    settings: Settings = request.app.state.settings
    return f"{settings.public_scheme}://{host_of(request).hostname or 'localhost'}{port_suffix(request)}"


def port_suffix(request: Request) -> str:
    """`:<port>` of the public URLs of this request's host, or "" for the scheme's default port: the port is
    PRISM_PUBLIC_PORT when set, else the one the client addressed (none from a malformed Host, which the edge
    refuses anyway: a port Prism writes into a URL is one a URL can carry)."""
    settings: Settings = request.app.state.settings
    port: int | None = settings.public_port
    if port is None:
        split = split_host(request.headers.get("host", ""))
        port = split[1] if split is not None else None
    if port is None or DEFAULT_PORTS.get(settings.public_scheme) == port:
        return ""
    return f":{port}"


def audiences_for(issuer: str) -> tuple[str, ...]:
    """What a token for this host may name as `aud`: the origin or the MCP endpoint (RFC 8707 resources)."""
    return (issuer, issuer + MCP_PATH)


def audience_of(resource: str | None, issuer: str) -> str:
    """The audience a `resource` parameter names (RFC 8707): absent, this origin, or the MCP endpoint (with or
    without a trailing slash); anything else is `invalid_target`."""
    if resource is None:
        return issuer
    value = resource.rstrip("/")
    if value in audiences_for(issuer):
        return value
    raise OAuthError(f"resource {resource!r} is not served here; use {issuer} or {issuer}{MCP_PATH}",
                     code="invalid_target")


def require_granted_resource(resource: str | None, audience: str, issuer: str) -> None:
    """A token request may name only the resource its authorization bound (RFC 8707 section 2.2), the origin
    when that named none; naming none keeps it."""
    if resource is not None and audience_of(resource, issuer) != audience:
        raise OAuthError(f"resource {resource!r} was not granted: this authorization is for {audience}",
                         code="invalid_target")
