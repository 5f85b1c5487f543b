"""Lists of IP networks in settings, and addresses compared with them.

An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, how a server listening on `::` sees an IPv4 peer) is the IPv4
address it maps, and a network of such addresses the IPv4 network it maps: `10.0.0.0/8` holds that peer.
"""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(spec: str) -> tuple[Network, ...]:
    """"10.0.0.1, 10.1.0.0/16" (or `;`-separated) -> networks (PRISM_TRUSTED_PROXIES, PRISM_METRICS_ALLOW); a bad
    entry is a ValueError naming it. A network of IPv4-mapped addresses (`::ffff:10.0.0.0/104`) is the IPv4 network
    it maps, since addresses are compared as the IPv4 address they map (`ip_of`)."""
    networks: list[Network] = []
    for item in spec.replace(";", ",").split(","):
        if item.strip():
            try:
                network = ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{item.strip()!r} is not an IP address or network") from None
            mapped = network.network_address.ipv4_mapped if isinstance(network, ipaddress.IPv6Network) else None
            if mapped is not None and network.prefixlen >= 96:
                network = ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}", strict=False)
            networks.append(network)
    return tuple(networks)


def ip_of(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`address` as an IP address to compare with networks, None when it is none. An IPv4-mapped IPv6 address is
    the IPv4 address it maps: a server listening on `::` (dual-stack) sees an IPv4 peer as `::ffff:10.0.0.1`,
    which `10.0.0.0/8` would not contain."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    return (ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None) or ip
