"""Outbound HTTP that cannot be aimed at Prism's own network (SSRF guard).

A URL a customer saves (a webhook receiver, an integration endpoint) must not let them reach loopback,
private networks, link-local addresses or a cloud metadata service through Prism. Two checks:

- ``check_url(url)`` at save time: the scheme, and every address the host resolves to now.
- ``outbound_client(...)`` at connect time: the transport resolves the host itself, refuses the connection
  if ANY resolved address is not public, and connects to the vetted address (TLS still verifies the
  certificate for the host name). A name that resolved to a public address at save time and to 127.0.0.1
  later (DNS rebinding) is refused here. Redirects are never followed and proxies from the environment are
  ignored (a proxy would make the address check meaningless).

``allow_private_networks`` (PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS) turns both checks off for tests and
on-premise receivers; ``ca_bundle`` (PRISM_WEBHOOK_CA_BUNDLE) adds CA certificates to trust.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import certifi
import httpcore
import httpx

from prism.errors import PrismError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundUrlRefused(PrismError):
    """A URL Prism will not send to; raised at save time (400)."""

    code, status = "url_not_allowed", 400


class OutboundConnectRefused(httpcore.ConnectError):
    """Raised by the transport at connect time; httpx surfaces it as httpx.ConnectError."""


def address_problem(address: IPAddress) -> str | None:
    """Why Prism will not connect to this address, or None when it is a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address_problem(address.ipv4_mapped)
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata services live there)"
    if address.is_private:
        return "a private network address"
    if address.is_multicast or address.is_unspecified or address.is_reserved or not address.is_global:
        return "not a public unicast address"
    return None


def _literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def resolve(host: str, port: int) -> list[IPAddress]:
    literal = _literal_address(host)
    if literal is not None:
        return [literal]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, IPAddress] = {}
    for *_, sockaddr in infos:
        text = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
        seen.setdefault(text, ipaddress.ip_address(text))
    return list(seen.values())


def _refusal(host: str, addresses: Iterable[IPAddress]) -> str | None:
    for address in addresses:
        problem = address_problem(address)
        if problem is not None:
            return f"{host} resolves to {address}, {problem}"
    return None


async def check_url(url: str, *, allow_private_networks: bool, require_https: bool = True,
                    field: str = "url") -> str:
    """The URL, normalised, or OutboundUrlRefused naming what is wrong with it."""
    def refuse(message: str) -> OutboundUrlRefused:
        return OutboundUrlRefused(f"{field}: {message}", details={"field": field})

    if any(c in url for c in "\r\n\t ") or not url:
        raise refuse("must be an absolute URL without whitespace")
    parts = urlsplit(url)
    if parts.scheme not in (("https",) if require_https else ("https", "http")):
        raise refuse("must use https" if require_https else "must use http or https")
    if not parts.hostname:
        raise refuse("must name a host")
    if parts.username or parts.password:
        raise refuse("must not carry credentials (use custom headers)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise refuse("has an invalid port") from None
    if allow_private_networks:
        return url
    try:
        addresses = await resolve(parts.hostname, port)
    except (OSError, UnicodeError):
        raise refuse(f"host {parts.hostname} does not resolve") from None
    problem = _refusal(parts.hostname, addresses)
    if problem is not None:
        raise refuse(f"refused: {problem}")
    return url


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, vets and connects to the vetted address, so a rebinding DNS answer cannot slip through."""

    def __init__(self, *, allow_private_networks: bool) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._allow_private = allow_private_networks

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await asyncio.wait_for(resolve(host, port), timeout)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        if not self._allow_private:
            problem = _refusal(host, addresses)
            if problem is not None:
                raise OutboundConnectRefused(f"connection refused by Prism: {problem}")
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(str(address), port, timeout=timeout,
                                                     local_address=local_address, socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"{host} has no address")

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise OutboundConnectRefused("unix sockets are not an outbound destination")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)
    return context


class GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, *, allow_private_networks: bool, ca_bundle: str | None = None,
                 limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        context = ssl_context(ca_bundle)
        super().__init__(verify=context, trust_env=False, limits=limits)
        # httpx has no parameter for the network backend; the pool is rebuilt with the guarded one.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(allow_private_networks=allow_private_networks))


def outbound_client(*, allow_private_networks: bool, ca_bundle: str | None = None,
                    timeout: float = 30.0, limits: httpx.Limits | None = None) -> httpx.AsyncClient:
    """An httpx client for customer-chosen URLs: guarded connects, no redirects, no environment proxies."""
    return httpx.AsyncClient(
        transport=GuardedTransport(allow_private_networks=allow_private_networks, ca_bundle=ca_bundle,
                                   limits=limits),
        follow_redirects=False, trust_env=False, timeout=timeout)
