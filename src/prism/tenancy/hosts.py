"""Which host a request came to: a tenant's subdomain, the developer portal, or the platform."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

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


@lru_cache(maxsize=4096)
def classify_host(host_header: str, base_domain: str) -> HostInfo:
    """`<sub>.<base>` is tenant `sub`; `portal.<base>` the portal; anything else the platform host."""
    host = host_header.strip().lower()
    if host.startswith("["):
        hostname = host.split("]")[0] + "]"
    else:
        hostname = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    hostname = hostname.rstrip(".")
    base = base_domain.lower().rstrip(".")
    if not hostname or _is_ip(hostname) or hostname == base or not hostname.endswith("." + base):
        return HostInfo("platform", hostname)
    label = hostname[: -len(base) - 1]
    if label == PORTAL_LABEL:
        return HostInfo("portal", hostname)
    return HostInfo("tenant", hostname, label)
