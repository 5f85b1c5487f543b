"""Which host a request came to: a tenant's subdomain, the developer portal, or the platform."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from prism.kit.numbers import whole_number

HostKind = Literal["tenant", "portal", "platform"]
PORTAL_LABEL = "portal"


@dataclass(frozen=True, slots=True)
class HostInfo:
    kind: HostKind
    hostname: str
    subdomain: str | None = None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def split_host(host_header: str) -> tuple[str, int | None] | None:
    """The host (lower-case, an IPv6 address in its brackets) and port of a Host header (`name`, `name:port`,
    `[v6]`, `[v6]:port`); the port is None when none is written. None for a Host no URL can name: an unclosed
    `[`, anything after `]` but a port, an IPv6 address without brackets, a port that is not 1 to 65535. Prism
    builds issuers and links from the Host, so it must be one a URL can carry."""
    host = host_header.strip().lower()
    if host.startswith("["):
        address, closed, rest = host.partition("]")
        if not closed or (rest and not rest.startswith(":")):
            return None
        name, port_text = address + "]", rest[1:]
    else:
        name, _, port_text = host.partition(":")
    if not port_text:
        return name, None
    port = _port(port_text)
    if port is None:
        return None  # an unbracketed IPv6 address lands here too: its "port" holds a colon
    return name, port


def _port(text: str) -> int | None:
    """1 to 65535 in ASCII digits (prism.kit.numbers: str.isdigit alone also takes "²", which int() refuses)."""
    port = whole_number(text)
    return port if port is not None and 0 < port < 65536 else None


@lru_cache(maxsize=4096)
def classify_host(host_header: str, base_domain: str) -> HostInfo:
    """`<sub>.<base>` is tenant `sub`; `portal.<base>` the portal; anything else the platform host. A malformed
    Host (split_host) names no host, so the edge refuses it as it refuses a missing one."""
    split = split_host(host_header)
    hostname = split[0].rstrip(".") if split is not None else ""
    base = base_domain.lower().rstrip(".")
    if not hostname or _is_ip(hostname) or hostname == base or not hostname.endswith("." + base):
        return HostInfo("platform", hostname)
    label = hostname[: -len(base) - 1]
    if label == PORTAL_LABEL:
        return HostInfo("portal", hostname)
    return HostInfo("tenant", hostname, label)
