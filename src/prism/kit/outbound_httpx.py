"""The outbound guard (prism.kit.outbound) for the official MCP client's HTTP: an httpx2 transport whose every
connection is resolved and vetted by Prism, then made to the vetted address.

The MCP client sends through an `httpx2.AsyncClient` Prism hands it. Left to httpx2, the client would resolve
an upstream's name itself each time it connects: a name checked when the session opened could re-resolve to
127.0.0.1 for the next connection (DNS rebinding, or a keep-alive connection replaced after it expired). Here
httpcore2's public network-backend interface does the connecting: the name is resolved, every address vetted
(`refusal`), and the socket opened to a vetted address; TLS verifies the certificate for the name as usual.

The streams are asyncio's own (the loop's TLS included) rather than httpcore2's default AnyIO streams, which
wrap each read and write in a cancel scope and run TLS through Python-level memory buffers: a forwarded call's
client costs about 150 µs less CPU this way (bench/README.md, "Federation").

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

from prism.kit.outbound import refusal, resolve

# httpcore2's errors and the httpx2 errors the MCP client (and its callers) expect, most specific first.
_ERRORS: tuple[tuple[type[Exception], type[Exception]], ...] = tuple(
    (getattr(httpcore2, name), getattr(httpx2, name)) for name in (
        "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "ConnectError", "ReadError", "WriteError",
        "RemoteProtocolError", "LocalProtocolError", "UnsupportedProtocol", "ProxyError"))


def guarded_transport(*, allow_private_networks: bool, ssl_context: ssl.SSLContext,
                      max_connections: int = 100, max_keepalive_connections: int = 20,
                      keepalive_expiry: float = 5.0) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport (HTTP/1.1, pooled) whose connections go only where the outbound rules allow."""
    pool = httpcore2.AsyncConnectionPool(
        ssl_context=ssl_context, max_connections=max_connections,
        max_keepalive_connections=max_keepalive_connections, keepalive_expiry=keepalive_expiry,
        network_backend=GuardedBackend(allow_private_networks=allow_private_networks))
    return _PoolTransport(pool)


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Connects to a vetted address of the host asked for, over asyncio's streams."""

    def __init__(self, *, allow_private_networks: bool) -> None:
        self._allow_private = allow_private_networks

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await self._vetted(host, port)
                failure: OSError | None = None
                for address in addresses:  # in the resolver's order, as a plain connect would try them
                    try:
                        local = (local_address, 0) if local_address else None
                        reader, writer = await asyncio.open_connection(str(address), port, local_addr=local)
                    except OSError as exc:
                        failure = exc
                        continue
                    sock = writer.get_extra_info("socket")
                    for option in socket_options or ():
                        sock.setsockopt(*option)
                    return AsyncioStream(reader, writer)
                raise httpcore2.ConnectError(f"could not connect to {host}:{port}: {failure}")
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"no connection to {host}:{port} within {timeout:g} s") from None

    async def _vetted(self, host: str, port: int) -> list[Any]:
        try:
            addresses = await resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore2.ConnectError(f"{host} does not resolve: {exc}") from exc
        if not addresses:
            raise httpcore2.ConnectError(f"{host} has no address")
        if not self._allow_private:
            problem = refusal(host, addresses)
            if problem is not None:
                raise httpcore2.ConnectError(f"connection refused by Prism: {problem}")
        return addresses

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("Prism does not connect to local sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class AsyncioStream(httpcore2.AsyncNetworkStream):
    """One connection as httpcore2 uses it: reads, writes, TLS, and whether an idle one was closed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError:
            raise httpcore2.ReadTimeout(f"no data within {timeout:g} s") from None
        except OSError as exc:  # ssl.SSLError included
            raise httpcore2.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()
        except TimeoutError:
            raise httpcore2.WriteTimeout(f"could not send within {timeout:g} s") from None
        except OSError as exc:
            raise httpcore2.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore2.AsyncNetworkStream:
        try:
            await self._writer.start_tls(ssl_context, server_hostname=server_hostname,
                                         ssl_handshake_timeout=timeout)
        except TimeoutError:
            self._writer.close()
            raise httpcore2.ConnectTimeout(f"no TLS handshake within {timeout:g} s") from None
        except OSError as exc:  # ssl.SSLError (a certificate that does not verify) included
            self._writer.close()
            raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # asked of an idle connection: has the server closed it?
            return self._reader.at_eof() or self._writer.transport.is_closing()
        name = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername",
                "socket": "socket"}.get(info)
        return self._writer.get_extra_info(name) if name else None


class _PoolTransport(httpx2.AsyncBaseTransport):
    """httpx2 requests through an httpcore2 pool, with httpcore2's errors raised as httpx2's."""

    def __init__(self, pool: httpcore2.AsyncConnectionPool) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                              target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        try:
            answer = await self._pool.handle_async_request(sent)
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return httpx2.Response(status_code=answer.status, headers=answer.headers, stream=_Body(answer.stream),
                               extensions=answer.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
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
