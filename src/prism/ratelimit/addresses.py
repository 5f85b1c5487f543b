"""The client address of a request: the peer, or X-Forwarded-For when the peer is a trusted proxy.

Trusting the header from anyone would let every client pick its own address and escape per-address
limits and the lockout, so it is read only when the connection comes from PRISM_TRUSTED_PROXIES.

Every X-Forwarded-For line of a request counts, joined in order (RFC 9110 §5.3: several lines of a list header
are one comma-separated list): a client's own line comes first and the proxy's appended one after it, so reading
only the first line would let the client choose its address. A hop may carry a port (`203.0.113.7:4711`,
`[2001:db8::7]:4711`) or brackets (`[2001:db8::7]`), as some proxies write them; the address is what counts.
A hop that is no address at all (`unknown`, an obfuscated `_node`, garbage) was written by the trusted proxy
to its right, so that proxy is the client: the unreadable entry tells nothing about who is behind it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from functools import lru_cache

from prism.kit.networks import Network, ip_of

UNKNOWN = "unknown"


class AddressResolver:
    def __init__(self, proxies: Iterable[Network]) -> None:
        self.proxies = tuple(proxies)
        self._trusted = lru_cache(maxsize=1024)(self._is_trusted)

    def _is_trusted(self, address: str) -> bool:
        ip = ip_of(address)
        return ip is not None and any(ip in network for network in self.proxies)

    def resolve(self, peer: str | None, forwarded_for: list[str] | None = None) -> str:
        """`forwarded_for`: every X-Forwarded-For line of the request, in the order received."""
        if not peer:
            return UNKNOWN
        if not self.proxies or not forwarded_for or not self._trusted(peer):
            return peer
        hops = [hop.strip() for line in forwarded_for for hop in line.split(",") if hop.strip()]
        # Right to left: each proxy appends the address it saw; the first one not ours is the client. `seen_by` is
        # the trusted hop that wrote the current entry (the peer wrote the last one).
        seen_by = peer
        for hop in reversed(hops):
            address = hop_address(hop)
            if address is None:  # unreadable: the proxy that wrote it is as far as anything is known
                return seen_by
            if not self._trusted(address):
                return address
            seen_by = address
        return seen_by


def hop_address(hop: str) -> str | None:
    """The IP address of one X-Forwarded-For entry, its port and brackets dropped; None when it names none.

    "203.0.113.7", "203.0.113.7:4711", "2001:db8::7", "[2001:db8::7]" and "[2001:db8::7]:4711" all name an
    address. An IPv6 address without brackets is read whole: "2001:db8::7:4711" is an address, not a port."""
    if hop.startswith("["):
        inside, bracket, rest = hop[1:].partition("]")
        if not bracket or (rest and not _is_port(rest[1:] if rest.startswith(":") else "")):
            return None
        return _ip(inside, version=6)
    if hop.count(":") == 1:  # IPv4 with a port (an IPv6 address has at least two colons)
        host, _, port = hop.partition(":")
        return _ip(host, version=4) if _is_port(port) else None
    return _ip(hop)


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5


def _ip(text: str, version: int | None = None) -> str | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return str(ip) if version is None or ip.version == version else None
