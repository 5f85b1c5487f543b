"""The outbound guard (prism.kit.outbound) for the official MCP client's HTTP: an httpx2 transport whose every
connection is resolved and vetted by Prism, then made to the vetted address.

The MCP client sends through an `httpx2.AsyncClient` Prism hands it. Left to httpx2, the client would resolve
an upstream's name itself each time it connects: a name checked when the session opened could re-resolve to
127.0.0.1 for the next connection (DNS rebinding, or a keep-alive connection replaced after it expired). Here
httpcore2's public network-backend interface does the connecting: the name is resolved, every address vetted
(`refusal`), and the socket opened to a vetted address; TLS verifies the certificate for the name as usual.

The connections are asyncio's own transports (the loop's TLS included), read through a protocol of this module,
rather than httpcore2's default AnyIO streams, which wrap each read and write in a cancel scope and run TLS
through Python-level memory buffers: a forwarded call costs Prism about 0.3 ms less CPU this way (bench/README.md,
"Federation: the MCP client's connections through Prism's own transport"). As httpcore2's default does, the
addresses of a name are tried in a staggered race, and an idle connection on which anything arrived (the server
closed it, or sent bytes nobody asked for) is not used again.

Imported only where an MCP session is opened: httpx2 and httpcore2 come with the official client (`prism[federation]`).
"""

# httpcore2's network interface passes each time limit as an argument named `timeout`.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore2
import httpx2

from prism.kit.outbound import vetted_addresses

# httpcore2's errors and the httpx2 errors the MCP client (and its callers) expect, most specific first.
_ERRORS: tuple[tuple[type[Exception], type[Exception]], ...] = tuple(
    (getattr(httpcore2, name), getattr(httpx2, name)) for name in (
        "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "ConnectError", "ReadError", "WriteError",
        "RemoteProtocolError", "LocalProtocolError", "UnsupportedProtocol", "ProxyError"))


def guarded_transport(*, allow_private_networks: bool, ssl_context: ssl.SSLContext,
                      max_connections: int = 100, max_keepalive_connections: int = 20,
                      keepalive_expiry: float = 5.0, max_answer_bytes: int | None = None) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport (HTTP/1.1, pooled) whose connections go only where the outbound rules allow.

    An answer read whole (anything but an event stream) stops with `AnswerTooLarge` past `max_answer_bytes`: an
    upstream must not be able to fill the process's memory. Every answer is asked for uncompressed, and one
    compressed anyway is refused (`CompressedAnswer`), so the bytes counted are the bytes the client reads. An
    event stream is read event by event, for as long as it lasts; the MCP client limits each event."""
    pool = httpcore2.AsyncConnectionPool(
        ssl_context=ssl_context, max_connections=max_connections,
        max_keepalive_connections=max_keepalive_connections, keepalive_expiry=keepalive_expiry,
        network_backend=GuardedBackend(allow_private_networks=allow_private_networks))
    return _PoolTransport(pool, max_answer_bytes)


class AnswerTooLarge(httpx2.StreamError):
    """The answer went past the transport's limit; nothing more of it is read. (A stream error: the MCP client
    answers the request with it, as with any answer it cannot read.)"""


class CompressedAnswer(httpx2.StreamError):
    """The answer came compressed though Prism asked for it as it is: not read (its size once inflated is
    unknown until it is inflated)."""


# An address that has not connected after this long gets the next one started beside it (RFC 8305's
# "Connection Attempt Delay"), as httpcore2's default backend does: an unreachable first address (often IPv6)
# must not use up the whole connect time.
NEXT_ADDRESS_AFTER_SECONDS = 0.25
# Past this many unread bytes the connection stops reading from the socket until they are read.
READ_AHEAD_BYTES = 256 * 1024


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Connects to a vetted address of the host asked for, over asyncio's transports."""

    def __init__(self, *, allow_private_networks: bool) -> None:
        self._allow_private = allow_private_networks

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await vetted_addresses(host, port, allow_private_networks=self._allow_private)
                connection = await first_to_connect([str(a) for a in addresses], port, local_address)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from None
        except (OSError, UnicodeError) as exc:  # ConnectRefused (the outbound rules) included
            raise httpcore2.ConnectError(f"could not connect to {host}:{port}: {exc}") from exc
        try:
            sock = connection.transport.get_extra_info("socket")
            for option in socket_options or ():
                sock.setsockopt(*option)
        except OSError as exc:
            connection.transport.close()
            raise httpcore2.ConnectError(f"could not set a socket option: {exc}") from exc
        return AsyncioStream(connection)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("Prism does not connect to local sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def first_to_connect(addresses: list[str], port: int, local_address: str | None) -> _Connection:
    """The first of the addresses to connect, each started `NEXT_ADDRESS_AFTER_SECONDS` after the one before (or
    as soon as it fails); the others are stopped, or closed if they connected too. OSError if none connects."""
    loop = asyncio.get_running_loop()
    local = (local_address, 0) if local_address else None

    async def attempt(address: str) -> _Connection:
        transport, connection = await loop.create_connection(_Connection, address, port, local_addr=local)
        connection.transport = transport  # uvloop calls connection_made only after this returns
        return connection

    waiting = list(addresses)
    running: set[asyncio.Task[_Connection]] = set()
    failures: list[OSError] = []
    winner: _Connection | None = None
    try:
        while winner is None and (waiting or running):
            if waiting:
                running.add(loop.create_task(attempt(waiting.pop(0))))
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED,
                                               timeout=NEXT_ADDRESS_AFTER_SECONDS if waiting else None)
            for task in done:
                error = task.exception()
                if error is None and winner is None:
                    winner = task.result()
                elif error is None:
                    task.result().transport.close()
                elif isinstance(error, OSError):
                    failures.append(error)
                else:
                    raise error
    finally:
        for task in running:  # still connecting: stop them, and close any that connected meanwhile
            task.cancel()
        for outcome in await asyncio.gather(*running, return_exceptions=True):
            if isinstance(outcome, _Connection):
                outcome.transport.close()
    if winner is None:
        raise failures[-1] if failures else OSError("no address to connect to")
    return winner


class _Connection(asyncio.Protocol):
    """One connection's side of asyncio's protocol interface: the bytes that arrived and are not read yet, whether
    the other side has ended, and whether the transport takes more to write."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set by connection_made
        self.unread = bytearray()
        self.ended = False
        self.lost: Exception | None = None
        self._reading_paused = False
        self._arrived: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport: create_connection's

    def data_received(self, data: bytes) -> None:
        self.unread += data
        if len(self.unread) > READ_AHEAD_BYTES and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        _release(self._arrived)

    def eof_received(self) -> None:
        self.ended = True  # returning None: the transport closes itself
        _release(self._arrived)

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended, self.lost = True, exc
        _release(self._arrived)
        _release(self._writable)

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        _release(self._writable)

    async def read(self, max_bytes: int) -> bytes:
        while not self.unread and not self.ended:
            self._arrived = asyncio.get_running_loop().create_future()
            await self._arrived
        if not self.unread:
            if self.lost is not None:
                raise self.lost
            return b""
        data = bytes(self.unread[:max_bytes])
        del self.unread[:max_bytes]
        if self._reading_paused and len(self.unread) <= READ_AHEAD_BYTES // 2:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    async def write(self, data: bytes) -> None:
        if self.ended and self.lost is not None:
            raise self.lost
        self.transport.write(data)
        while self._writable is not None and not self._writable.done() and not self.ended:
            await self._writable


def _release(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


class AsyncioStream(httpcore2.AsyncNetworkStream):
    """One connection as httpcore2 uses it: reads, writes, TLS, and whether an idle one was closed."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._connection.read(max_bytes)
        except TimeoutError as exc:
            if exc.errno is not None:  # the socket's own ETIMEDOUT: the connection failed
                raise httpcore2.ReadError(str(exc)) from exc
            raise httpcore2.ReadTimeout(f"no data within {timeout} s") from None
        except OSError as exc:  # ssl.SSLError included
            raise httpcore2.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._connection.write(buffer)
        except TimeoutError as exc:
            if exc.errno is not None:
                raise httpcore2.WriteError(str(exc)) from exc
            raise httpcore2.WriteTimeout(f"could not send within {timeout} s") from None
        except (OSError, RuntimeError) as exc:  # RuntimeError: writing to a transport already closed
            raise httpcore2.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._connection.transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore2.AsyncNetworkStream:
        connection = self._connection
        try:
            async with asyncio.timeout(timeout):
                upgraded = await asyncio.get_running_loop().start_tls(
                    connection.transport, connection, ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            connection.transport.close()
            if exc.errno is not None:
                raise httpcore2.ConnectError(str(exc)) from exc
            raise httpcore2.ConnectTimeout(f"no TLS handshake within {timeout} s") from None
        except OSError as exc:  # ssl.SSLError (a certificate that does not verify) included
            connection.transport.close()
            raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from exc
        assert upgraded is not None
        connection.transport = upgraded  # the protocol now hears the TLS transport, not the socket's
        return self

    def get_extra_info(self, info: str) -> Any:
        connection = self._connection
        if info == "is_readable":  # asked of an idle connection: did anything arrive, or did the server close it?
            return bool(connection.unread) or connection.ended or connection.transport.is_closing()
        name = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername",
                "socket": "socket"}.get(info)
        return connection.transport.get_extra_info(name) if name else None


class _PoolTransport(httpx2.AsyncBaseTransport):
    """httpx2 requests through an httpcore2 pool, with httpcore2's errors raised as httpx2's."""

    def __init__(self, pool: httpcore2.AsyncConnectionPool, max_answer_bytes: int | None) -> None:
        self._pool = pool
        self._max_answer_bytes = max_answer_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                              target=request.url.raw_path),
            headers=uncompressed(request.headers.raw), content=request.stream, extensions=request.extensions)
        try:
            answer = await self._pool.handle_async_request(sent)
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is None:
                raise
            raise mapped from exc
        limit = None if _is_event_stream(answer.headers) else self._max_answer_bytes
        return httpx2.Response(status_code=answer.status, headers=answer.headers,
                               stream=_Body(answer.stream, limit, _content_encoding(answer.headers)),
                               extensions=answer.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()


def uncompressed(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The request's headers asking for the answer as it is (`Accept-Encoding: identity`) whatever the client
    asked: httpx2 inflates a compressed answer after the transport has counted it, so a few kilobytes of gzip
    could become gigabytes past `max_answer_bytes`, and one chunk of an event stream a thousandfold."""
    return [(name, value) for name, value in headers if name.lower() != b"accept-encoding"] + [
        (b"Accept-Encoding", b"identity")]


def _content_encoding(headers: list[tuple[bytes, bytes]]) -> str:
    """The answer's Content-Encoding, '' for none or identity."""
    found = [value.decode("latin-1").strip().lower() for name, value in headers if name.lower() == b"content-encoding"]
    return ", ".join(v for v in found if v not in ("", "identity"))


def _is_event_stream(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name.lower() == b"content-type" and value.lower().startswith(b"text/event-stream")
               for name, value in headers)


class _Body(httpx2.AsyncByteStream):
    """An answer's body, counted as it arrives: the bytes counted are the bytes the client gets, as the answer
    is never compressed (an upstream that compresses it anyway, unasked, is refused before anything is read)."""

    def __init__(self, stream: Any, limit: int | None, encoding: str) -> None:
        self._stream = stream
        self._limit = limit
        self._encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._encoding:
            raise CompressedAnswer(f"the answer is compressed (Content-Encoding: {self._encoding[:40]}), which "
                                   "Prism does not accept: it asks for Accept-Encoding: identity")
        read = 0
        try:
            async for part in self._stream:
                read += len(part)
                if self._limit is not None and read > self._limit:
                    raise AnswerTooLarge(f"the answer is larger than {self._limit:,} bytes")
                yield part
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


def _as_httpx(exc: Exception) -> Exception | None:
    for theirs, ours in _ERRORS:
        if isinstance(exc, theirs):
            return ours(str(exc))
    return None
