"""The issuer and public URLs of a host, built from configuration and the Host header (never X-Forwarded-*)."""

from __future__ import annotations

from starlette.requests import Request

from prism.config import Settings
from prism.web.requests import host_of

MCP_PATH = "/api/mcp/sse"
DEFAULT_PORTS = {"http": 80, "https": 443}


def issuer_for(request: Request) -> str:
    """`<PRISM_PUBLIC_SCHEME>://<host>[:port]`: the same string wherever it appears (metadata, iss, tokens).

    The port is PRISM_PUBLIC_PORT when set, else the one the client addressed.
    """
    settings: Settings = request.app.state.settings
    host = host_of(request)
    header = request.headers.get("host", "").strip().lower()
    port: int | None = settings.public_port
    if port is None and not header.endswith("]") and ":" in header:
        tail = header.rsplit(":", 1)[1]
        port = int(tail) if tail.isdigit() else None
    scheme = settings.public_scheme
    hostname = host.hostname or "localhost"
    if port is None or DEFAULT_PORTS.get(scheme) == port:
        return f"{scheme}://{hostname}"
    return f"{scheme}://{hostname}:{port}"


def audiences_for(issuer: str) -> tuple[str, ...]:
    """What a token for this host may name as `aud`: the origin or the MCP endpoint (RFC 8707 resources)."""
    return (issuer, issuer + MCP_PATH)
