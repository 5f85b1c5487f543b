"""Which hosts Prism answers, and which browser origins may call the MCP door (docs/oauth.md "Hosts and origins").

Prism builds issuers, discovery documents and links from the Host header, so a Host it does not serve must
never reach a door: an attacker's name pointed at Prism (DNS rebinding, a poisoned cache in front of it) would
otherwise come back in an issuer or a link. Answered hosts are `PRISM_BASE_DOMAIN`, its subdomains (a tenant, the
portal), the loopback names (`localhost`, `127.0.0.0/8`, `[::1]`: only a page already on this machine can make a
browser send them) and `PRISM_EXTRA_HOSTS`. Any other Host is 421 `misdirected_request`; a tenant subdomain with
no tenant is 404 `tenant_not_found` (the edge checks that, it needs the database).

The MCP door also checks `Origin` when a browser sends one: the host's own origin and those of
`PRISM_MCP_ALLOWED_ORIGINS` pass, any other (`null` included) is 403 `origin_not_allowed`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from prism.config import Settings
from prism.errors import PermissionDenied, PrismError
from prism.kit.urls import split_url
from prism.tenancy.hosts import HostInfo

DEFAULT_PORTS = {"http": 80, "https": 443}


class MisdirectedRequest(PrismError):
    code, status = "misdirected_request", 421


class OriginNotAllowed(PermissionDenied):
    code = "origin_not_allowed"


@lru_cache(maxsize=1024)  # parsing an address costs more than the rest of the host check; few names recur
def is_loopback_name(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname.strip("[]")).is_loopback
    except ValueError:
        return False


def _names(spec: str) -> frozenset[str]:
    return frozenset(item.strip().lower().rstrip(".") for item in spec.split(",") if item.strip())


def _without_port(name: str) -> str:
    """`host`, `[v6]` or an IPv4 address, without the port an operator may have written after it."""
    if name.startswith("["):
        return name.split("]", 1)[0] + "]"
    return name.rsplit(":", 1)[0] if name.count(":") == 1 else name


def _origin(value: str) -> str | None:
    """`scheme://host[:port]`, lower-case, the default port dropped; None when it is not an origin (a browser
    sends a well-formed one, anything may come from another client: `http://[::1` cannot even be parsed)."""
    parts = split_url(value.strip().lower())
    if parts is None:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.username:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


@dataclass(frozen=True, slots=True)
class HostPolicy:
    base_domain: str
    extra_hosts: frozenset[str]
    allowed_origins: frozenset[str]  # normalised origins; "*" lets any origin call

    @classmethod
    def from_settings(cls, settings: Settings) -> HostPolicy:
        origins = frozenset(o if o == "*" else (_origin(o) or o) for o in _names(settings.mcp_allowed_origins))
        extra = frozenset(_without_port(name) for name in _names(settings.extra_hosts))
        return cls(settings.base_domain.lower().rstrip("."), extra, origins)

    def serves(self, host: HostInfo) -> bool:
        name = host.hostname
        if not name:
            return False
        if name == self.base_domain or name.endswith("." + self.base_domain):
            return True
        return is_loopback_name(name) or name in self.extra_hosts or name.strip("[]") in self.extra_hosts

    def host_refusal(self, host: HostInfo) -> MisdirectedRequest | None:
        if self.serves(host):
            return None
        # The refused name is not echoed back: it is the attacker's choice.
        return MisdirectedRequest("this server does not answer for the host named in the request; use "
                                  f"{self.base_domain} or one of its subdomains")

    def origin_refusal(self, origin: str | None, host_header: str) -> OriginNotAllowed | None:
        """None when no Origin was sent, it is the request host's own, or it is allowed by configuration."""
        if origin is None or "*" in self.allowed_origins:
            return None
        normalised = _origin(origin)
        if normalised is not None and (normalised in self.allowed_origins
                                       or _same_host(normalised, host_header)):
            return None
        return OriginNotAllowed("requests from this Origin are not accepted on the MCP endpoint; an operator "
                                "allows a browser client's origin with PRISM_MCP_ALLOWED_ORIGINS")


def _same_host(origin: str, host_header: str) -> bool:
    """Whether the origin names the host (and port) the request was sent to, whatever its scheme: behind a
    TLS-terminating proxy the page is https while Prism is reached over http."""
    scheme = origin.split("://", 1)[0]
    wanted = _origin(f"{scheme}://{host_header.strip().lower()}")
    return wanted is not None and wanted == origin
