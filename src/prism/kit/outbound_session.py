"""The aiohttp side of prism.kit.outbound: its guarded resolver, its session and one request.

Imported by `OutboundClient` with its first request, not at start-up: aiohttp and its dependencies take
about 0.13 s to import, a good part of a server's start-up budget.
"""

from __future__ import annotations

import socket
import ssl

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.helpers import is_ip_address
from yarl import URL

from prism.kit.outbound import LookupThreads, vetted_addresses

# What a failed request raises. ValueError: a URL or a header value aiohttp refuses to send.
REQUEST_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError, OSError, ssl.SSLError, ValueError)


class GuardedResolver(AbstractResolver):
    """Resolves and vets every address; aiohttp then connects only to the addresses returned here."""

    def __init__(self, *, allow_private_networks: bool, lookups: LookupThreads | None) -> None:
        self._allow_private = allow_private_networks
        self._lookups = lookups

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addresses = await vetted_addresses(host, port, allow_private_networks=self._allow_private,
                                           lookups=self._lookups)
        return [ResolveResult(hostname=host, host=str(a), port=port,
                              family=socket.AF_INET6 if a.version == 6 else socket.AF_INET, proto=0,
                              flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV) for a in addresses]

    async def close(self) -> None:
        return None


def open_session(*, ssl_context: ssl.SSLContext, limit: int, allow_private_networks: bool,
                 lookups: LookupThreads | None) -> aiohttp.ClientSession:
    """Guarded connects, no proxies from the environment; made inside the running loop."""
    resolver = GuardedResolver(allow_private_networks=allow_private_networks, lookups=lookups)
    connector = aiohttp.TCPConnector(ssl=ssl_context, limit=limit, resolver=resolver)
    return aiohttp.ClientSession(connector=connector, trust_env=False)


def target_of(url: str, *, encoded: bool) -> URL:
    """The URL as aiohttp sends it: parsed by yarl, as aiohttp parses a URL given as text. `encoded`: already
    percent-encoded, sent as it is. Its `raw_host` is the host aiohttp connects to, which need not be the text of
    the URL: yarl maps a host through IDNA, so 127.0.0.1 written in full-width digits or with ideographic full
    stops (U+3002) becomes 127.0.0.1, an address where urllib still reads a name."""
    return URL(url, encoded=encoded)


async def vet_direct_address(target: URL, *, allow_private_networks: bool) -> None:
    """aiohttp connects to a host it takes for an address (its own `is_ip_address`) without asking the resolver:
    that host is vetted here as the resolver vets a name (ConnectRefused names what is wrong)."""
    host = target.raw_host or ""
    if is_ip_address(host):
        await vetted_addresses(host, target.port or 0, allow_private_networks=allow_private_networks)


async def request(session: aiohttp.ClientSession, method: str, target: URL, *, headers: dict[str, str],
                  body: bytes | None, read_at_most: int) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, lower-cased headers (a repeated one keeps its first value), body, truncated); no redirects.
    The caller bounds the time and vets a direct address (`vet_direct_address`)."""
    async with session.request(method, target, data=body or None, headers=headers, allow_redirects=False,
                               timeout=aiohttp.ClientTimeout(total=None)) as response:
        data = bytearray()
        while len(data) < read_at_most:
            piece = await response.content.read(read_at_most - len(data))
            if not piece:
                break
            data += piece
        truncated = len(data) >= read_at_most and bool(await response.content.read(1))
        found = {name.lower(): value for name, value in reversed(list(response.headers.items()))}
        return response.status, found, bytes(data), truncated
