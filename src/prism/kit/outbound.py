"""Outbound HTTP that cannot be aimed at Prism's own network (SSRF guard).

A URL a customer saves (a webhook receiver, an integration endpoint) must not let them reach loopback,
private networks, link-local addresses or a cloud metadata service through Prism. Two checks:

- ``check_url(url)`` at save time: the scheme, and every address the host resolves to now (within
  RESOLVE_WITHIN_SECONDS, on threads of its own: ``LookupThreads``).
- ``OutboundClient`` at connect time: its resolver resolves the host itself, refuses the connection if ANY
  resolved address is not public, and the connection goes to the vetted address (TLS still verifies the
  certificate for the host name). A name that resolved to a public address at save time and to 127.0.0.1
  later (DNS rebinding) is refused here; an address in the URL, which aiohttp connects to without asking the
  resolver, is vetted before anything is sent as aiohttp reads it (yarl maps full-width digits and ideographic
  full stops to ASCII ones, so they can name 127.0.0.1 too).
  Redirects are never followed and proxies from the environment are ignored (a proxy would make the
  address check meaningless). The official MCP client's HTTP (httpx2) is guarded the same way by the
  transport of ``prism.kit.outbound_httpx``.

The client is aiohttp's: a webhook worker spends its CPU here, and aiohttp sends a request for about a
twentieth of httpx's CPU time (bench/README.md, "Webhook delivery"). It lives in
``prism.kit.outbound_session``, imported with the first request: aiohttp and its dependencies take about
0.13 s to import, which every start-up would otherwise pay.

``allow_private_networks`` (PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS) turns both checks off for tests and
on-premise receivers; ``ca_bundle`` (PRISM_WEBHOOK_CA_BUNDLE) adds CA certificates to trust.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import certifi

from prism.errors import PrismError
from prism.kit.urls import split_url
from prism.observability.logs import security_event

if TYPE_CHECKING:
    import aiohttp

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# How long `check_url` waits for the host's addresses before refusing the URL.
RESOLVE_WITHIN_SECONDS = 5.0
# How many save-time lookups run at once (`LookupThreads`); one more is refused (503) until one ends.
LOOKUPS_AT_ONCE = 8
# How many lookups of the webhook workers of a process run at once: a worker's default concurrency, so that each
# of its slots may be resolving a host of its own; one more is refused at once (LookupBusy: the delivery is put off,
# no attempt counted).
DELIVERY_LOOKUPS_AT_ONCE = 16
# How many of those one organization's deliveries may take: receivers whose DNS stalls, all of one organization,
# leave the other organizations' deliveries the rest (a lookup that never answers keeps its thread tens of seconds).
DELIVERY_LOOKUPS_PER_ORGANIZATION = 4
# Whose share of a `LookupThreads`' threads (`per_owner`) the lookups made in this context take: set around a
# request by `OutboundClient.send(lookup_owner=…)`, read by the resolver aiohttp calls from inside that request.
LOOKUP_OWNER: ContextVar[str | None] = ContextVar("prism_lookup_owner", default=None)


class OutboundUrlRefused(PrismError):
    """A URL Prism will not send to; raised at save time (400)."""

    code, status = "url_not_allowed", 400


class ResolverBusy(PrismError):
    """Every thread of a `LookupThreads` is taken (hosts whose DNS servers answer slowly, or never): try again."""

    code, status = "resolver_busy", 503

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(int(RESOLVE_WITHIN_SECONDS))}


class LookupThreads:
    """The system resolver, asked on threads of its own, at most `threads` lookups at a time.

    A lookup cannot be stopped: one stopped waiting for (RESOLVE_WITHIN_SECONDS) keeps its thread until the
    system resolver gives up, tens of seconds later for a name whose DNS servers never answer. Asked through the
    event loop, a few such lookups took every thread of its shared pool, and everything else run there waited:
    asyncio's default executor (min(32, cores + 4) threads: 6 on 2 cores; password checks, document indexing, the
    tenant descriptor's build), or under uvloop (`prism serve`) libuv's 4 threads (every other host-name lookup of
    the process, database connections by name). Here they take only these threads, and a lookup that finds them
    all taken fails at once (ResolverBusy) rather than queued behind lookups that may never answer: a save is
    refused (503), a delivery is put off a few seconds (no attempt counted: it says nothing of its receiver). Two
    sets: save-time checks (`SAVE_TIME_LOOKUPS`) and the webhook workers' connects (`DELIVERY_LOOKUPS`), so a
    delivery backlog to hosts whose DNS hangs never refuses saves, nor saves delay deliveries.

    `per_owner`: at most that many of the threads for the lookups of one owner (`LOOKUP_OWNER`, a delivery's
    organization), so that one organization's receivers whose DNS stalls cannot take every thread from the others.

    Each lookup runs on a daemon thread started for it (a few hundred microseconds beside the lookup's own
    network round trip): a process that ends does not wait for lookups nobody will read, as it waits for an
    executor's threads, for as long as the system resolver takes to give up (`prism worker` stopped by SIGTERM,
    `prism serve` by Ctrl-C, any CLI command)."""

    def __init__(self, threads: int, name: str, *, per_owner: int | None = None) -> None:
        self._free = threading.BoundedSemaphore(threads)  # a slot per thread: a lookup never waits for one
        self._name = name
        self._per_owner = per_owner
        self._owners: Counter[str] = Counter()  # lookups running per owner; released on the lookup's own thread
        self._owners_lock = threading.Lock()

    async def getaddrinfo(self, host: str, port: int) -> list[tuple[Any, ...]]:
        owner = LOOKUP_OWNER.get() if self._per_owner is not None else None
        if not self._take_owners_share(owner):
            raise ResolverBusy("too many of this organization's host names are being resolved right now (their "
                               "DNS servers answer slowly); try again shortly")
        if not self._free.acquire(blocking=False):
            self._release_owners_share(owner)
            raise ResolverBusy("too many host names are being resolved right now (their DNS servers answer "
                               "slowly); try again shortly")
        answer: concurrent.futures.Future[list[tuple[Any, ...]]] = concurrent.futures.Future()

        def lookup() -> None:
            try:
                if answer.set_running_or_notify_cancel():  # else its caller gave up before it began
                    try:
                        answer.set_result(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
                    except BaseException as exc:
                        answer.set_exception(exc)
            finally:
                self._release(owner)  # when the lookup ends, whether or not its caller still waits

        try:
            threading.Thread(target=lookup, name=self._name, daemon=True).start()
        except BaseException:  # no thread (the system's limit): nothing will free the slot
            self._release(owner)
            raise
        return await asyncio.wrap_future(answer)

    def _take_owners_share(self, owner: str | None) -> bool:
        if owner is None or self._per_owner is None:
            return True
        with self._owners_lock:
            if self._owners[owner] >= self._per_owner:
                return False
            self._owners[owner] += 1
            return True

    def _release_owners_share(self, owner: str | None) -> None:
        if owner is None or self._per_owner is None:
            return
        with self._owners_lock:
            self._owners[owner] -= 1
            if self._owners[owner] <= 0:
                del self._owners[owner]

    def _release(self, owner: str | None) -> None:
        self._free.release()
        self._release_owners_share(owner)


SAVE_TIME_LOOKUPS = LookupThreads(LOOKUPS_AT_ONCE, "prism-dns")
DELIVERY_LOOKUPS = LookupThreads(DELIVERY_LOOKUPS_AT_ONCE, "prism-dns-delivery",
                                 per_owner=DELIVERY_LOOKUPS_PER_ORGANIZATION)


class OutboundFailed(Exception):
    """No HTTP answer: the connection was refused (by Prism's guard or the peer), TLS failed, the peer hung up."""


class OutboundTimeout(OutboundFailed):
    """No complete answer within the request's time limit."""


class LookupBusy(OutboundFailed):
    """Nothing was sent: no thread of the client's `LookupThreads` was free to resolve the host (every one taken, or
    its owner's share). It says nothing of the receiver; try again shortly."""


class ConnectRefused(OSError):
    """Raised by the resolver at connect time; aiohttp reports it as a connection error."""


class LookupUnanswered(OSError):
    """A connect-time lookup on `LookupThreads` that did not answer within RESOLVE_WITHIN_SECONDS; aiohttp reports it
    as a connection error, so the attempt fails (and is retried later)."""


class NoLookupThread(OSError):
    """A connect-time lookup that found no thread of its `LookupThreads` free (ResolverBusy); raised through aiohttp
    as a connection error, which `OutboundClient.send` reports as LookupBusy."""


def address_problem(address: IPAddress) -> str | None:
    """Why Prism will not connect to this address, or None when it is a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address inside an IPv6 one: mapped (::ffff:a.b.c.d), or 6to4 (2002:AABB:CCDD::), which a 6to4
        # relay delivers to a.b.c.d. Python calls 2002::/16 global whatever it embeds.
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            return address_problem(embedded)
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata services live there)"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        # fec0::/10, deprecated by RFC 3879 but still routed inside some networks; Python counts it as global.
        return "a site-local address"
    if address.is_private:
        return "a private network address"
    if address.is_multicast or address.is_unspecified or address.is_reserved or not address.is_global:
        return "not a public unicast address"
    return None


def _literal_address(host: str) -> IPAddress | None:
    """The address a host names itself, or None for a name. A URL writes an IPv6 zone's "%" as "%25"
    (RFC 6874: `[fe80::1%25eth0]`), which URL parsers leave encoded: decoded here, or the zone would be `25eth0`."""
    try:
        return ipaddress.ip_address(unquote(host.strip("[]")))
    except ValueError:
        return None


async def resolve(host: str, port: int, *, lookups: LookupThreads | None = None) -> list[IPAddress]:
    """Every address of `host` (itself, when it is one), as the system resolver answers, asked on `lookups`'
    threads (save time, webhook deliveries) or else the event loop's (other connects). Looked up by name at each
    call: the one place where Prism asks DNS, so the place to stand in for it."""
    literal = _literal_address(host)
    if literal is not None:
        return [literal]
    if lookups is not None:
        infos = await lookups.getaddrinfo(host, port)
    else:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, IPAddress] = {}
    for *_, sockaddr in infos:
        address = address_of(sockaddr)
        seen.setdefault(str(address), address)
    return list(seen.values())


def address_of(sockaddr: tuple[Any, ...]) -> IPAddress:
    """The address of a socket address getaddrinfo gave, with its IPv6 zone (the scope id, its fourth item): a
    link-local address names no host without the interface it is on."""
    text = str(sockaddr[0]).split("%", 1)[0]
    if len(sockaddr) == 4 and sockaddr[3]:
        text = f"{text}%{sockaddr[3]}"
    return ipaddress.ip_address(text)


def refusal(host: str, addresses: Iterable[IPAddress]) -> str | None:
    """Why Prism will not connect to `host`, or None. For a name, the answer says only that it is not public:
    where an internal name points (its address, even its kind) is the network's map, not the customer's to
    learn, one guess at a time. The operator's security log names the address and why."""
    for address in addresses:
        problem = address_problem(address)
        if problem is not None:
            security_event("outbound_target_refused", host=host, address=str(address), reason=problem)
            if _literal_address(host) is not None:  # the address the URL wrote: nothing is learnt by naming it
                return f"{host} is {problem}"
            return f"{host} is not a public address"
    return None


async def vetted_addresses(host: str, port: int, *, allow_private_networks: bool,
                           lookups: LookupThreads | None = None) -> list[IPAddress]:
    """Every address `host` resolves to, when Prism may connect to all of them (what a guarded client connects to):
    ConnectRefused names one it may not, OSError says the host has none or does not resolve. On `lookups`' threads
    when given, within RESOLVE_WITHIN_SECONDS (LookupUnanswered): the lookup keeps its thread after that, and a
    connect holding its caller for as long would only take the next lookup's thread too."""
    if lookups is None:
        addresses = await resolve(host, port)
    else:
        try:
            async with asyncio.timeout(RESOLVE_WITHIN_SECONDS):
                addresses = await resolve(host, port, lookups=lookups)
        except TimeoutError:
            raise LookupUnanswered(f"{host} did not resolve within {RESOLVE_WITHIN_SECONDS:g} s") from None
        except ResolverBusy as exc:
            raise NoLookupThread(exc.message) from None
    if not allow_private_networks:
        problem = refusal(host, addresses)
        if problem is not None:
            raise ConnectRefused(f"connection refused by Prism: {problem}")
    if not addresses:
        raise OSError(f"{host} has no address")
    return addresses


async def check_url(url: str, *, allow_private_networks: bool, require_https: bool = True,
                    field: str = "url") -> str:
    """The URL, normalised, or OutboundUrlRefused naming what is wrong with it."""
    def refuse(message: str) -> OutboundUrlRefused:
        return OutboundUrlRefused(f"{field}: {message}", field=field)

    if any(c in url for c in "\r\n\t ") or not url:
        raise refuse("must be an absolute URL without whitespace")
    parts = split_url(url)
    if parts is None:
        raise refuse("is not a valid URL (an IPv6 address must be written in [brackets])")
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
        # Bounded: a name whose DNS servers never answer would otherwise hold its caller for as long as the
        # system resolver keeps retrying (tens of seconds), whatever waits on that caller meanwhile.
        # On threads of their own (LookupThreads), so that lookups left running after this time limit cannot take
        # every thread of the default executor; ResolverBusy (503) when those are all taken.
        async with asyncio.timeout(RESOLVE_WITHIN_SECONDS):
            addresses = await resolve(parts.hostname, port, lookups=SAVE_TIME_LOOKUPS)
    except TimeoutError:
        raise refuse(f"host {parts.hostname} did not resolve within {RESOLVE_WITHIN_SECONDS:g} s") from None
    except (OSError, UnicodeError):
        raise refuse(f"host {parts.hostname} does not resolve") from None
    problem = refusal(parts.hostname, addresses)
    if problem is not None:
        raise refuse(f"refused: {problem}")
    return url


def ssl_context(ca_bundle: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)
    return context


@dataclass(frozen=True, slots=True)
class OutboundAnswer:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its first value
    body: bytes  # at most `read_at_most` bytes of the (decoded) body
    truncated: bool  # the body went on beyond `read_at_most`


class OutboundClient:
    """HTTP to customer-chosen URLs: guarded connects, no redirects, no environment proxies, bounded reads.

    One per worker (its connections are kept alive between deliveries) or one per call; close it, or use it
    as an async context manager. The aiohttp session is made on first use, inside the running loop.
    """

    def __init__(self, *, allow_private_networks: bool, ca_bundle: str | None = None,
                 max_connections: int = 100, lookups: LookupThreads | None = None) -> None:
        """`lookups`: the threads its host names are resolved on (`vetted_addresses`); by default the event
        loop's."""
        self._allow_private = allow_private_networks
        self._ssl = ssl_context(ca_bundle)
        self._max_connections = max_connections
        self._lookups = lookups
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> OutboundClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            from prism.kit.outbound_session import open_session

            self._session = open_session(ssl_context=self._ssl, limit=self._max_connections,
                                         allow_private_networks=self._allow_private, lookups=self._lookups)
        return self._session

    async def send(self, method: str, url: str, *, headers: dict[str, str], body: bytes | None,
                   timeout_seconds: float, read_at_most: int, encoded: bool = False,
                   lookup_owner: str | None = None) -> OutboundAnswer:
        """One request; the time limit covers connect, send and the whole answer. `encoded`: the URL is
        percent-encoded already and goes out as it is (else the HTTP client normalises it, and would decode
        `%3B` in a path back to `;`). `lookup_owner`: whose share of the client's lookup threads resolving the host
        takes (a delivery's organization); LookupBusy when none is free."""
        from prism.kit.outbound_session import REQUEST_ERRORS, request, target_of, vet_direct_address

        owner = LOOKUP_OWNER.set(lookup_owner)  # aiohttp resolves in a task started here: it inherits the value
        try:
            async with asyncio.timeout(timeout_seconds):
                target = target_of(url, encoded=encoded)
                await vet_direct_address(target, allow_private_networks=self._allow_private)
                status, found, data, truncated = await request(self._open(), method, target, headers=headers,
                                                               body=body, read_at_most=read_at_most)
                return OutboundAnswer(status, found, data, truncated)
        except ConnectRefused as exc:
            raise OutboundFailed(str(exc)) from None
        except TimeoutError:
            raise OutboundTimeout(f"timed out after {timeout_seconds:g} s") from None
        except REQUEST_ERRORS as exc:
            inner = getattr(exc, "os_error", exc)
            if isinstance(inner, NoLookupThread):
                raise LookupBusy(str(inner)) from None
            raise OutboundFailed(f"connection failed: {_describe(exc)}"[:1000]) from exc
        finally:
            LOOKUP_OWNER.reset(owner)


def _describe(exc: BaseException) -> str:
    """The innermost reason aiohttp wrapped (the guard's refusal, the TLS error), or the error itself."""
    inner = getattr(exc, "os_error", None)
    if isinstance(inner, ConnectRefused | LookupUnanswered):
        return str(inner)
    return str(exc) or type(exc).__name__
