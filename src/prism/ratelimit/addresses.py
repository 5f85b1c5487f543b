"""The client address of a request: the peer, or X-Forwarded-For when the peer is a trusted proxy.

Trusting the header from anyone would let every client pick its own address and escape per-address
limits and the lockout, so it is read only when the connection comes from PRISM_TRUSTED_PROXIES.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNKNOWN = "unknown"


def parse_proxies(spec: str) -> tuple[Network, ...]:
    """"10.0.0.1, 10.1.0.0/16" -> networks; a bad entry is a configuration error raised at start."""
    networks = []
    for item in spec.replace(";", ",").split(","):
        if item.strip():
            try:
                networks.append(ipaddress.ip_network(item.strip(), strict=False))
            except ValueError:
                raise ValueError(f"PRISM_TRUSTED_PROXIES: {item.strip()!r} is not an IP address or network") from None
    return tuple(networks)


class AddressResolver:
    def __init__(self, proxies: Iterable[Network]) -> None:
        self.proxies = tuple(proxies)
        self._trusted = lru_cache(maxsize=1024)(self._is_trusted)

    def _is_trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.proxies)

    def resolve(self, peer: str | None, forwarded_for: str | None) -> str:
        if not peer:
            return UNKNOWN
        if not self.proxies or forwarded_for is None or not self._trusted(peer):
            return peer
        # Right to left: each hop appends the address it saw; the first one not ours is the client.
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        for hop in reversed(hops):
            if not self._trusted(hop):
                return hop if _is_ip(hop) else peer
        return hops[0] if hops else peer


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
