"""One deadline for the whole of a synchronous attempt: waiting for a pooled connection, connecting, sending, the
status line and headers, the body.

httpx's `timeout` bounds each step on its own (a connect, each read, each write), never their sum: a server
dribbling its headers or body a byte at a time, each byte within the timeout, holds the call as long as it likes.
The async client wraps the attempt in `asyncio.timeout`; a blocking socket has no such thing, so here every
socket operation gets the smaller of its own timeout and the time left before the attempt's deadline, and so does
the wait for a pooled connection while every one is busy serving other calls.

`DeadlineTransport` is httpx's plain HTTP/1.1 transport (no proxy) built from httpcore's public parts, with a
network backend that asks the current deadline (set by `deadline_after` around an attempt) before each
operation: pooled connections included, whenever they were opened.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

_current_deadline: ContextVar[float | None] = ContextVar("prism_client_deadline", default=None)

# httpcore's errors as httpx raises them (most specific first), so that the client handles them as it would
# with httpx's own transport.
_HTTPX_ERROR_FOR: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def deadline_after(seconds: float) -> Iterator[None]:
    """Every socket operation of this thread's calls inside the block ends by `seconds` from now."""
    token = _current_deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _current_deadline.reset(token)


def _bounded(timeout: float | None, expired: type[httpcore.TimeoutException]) -> float | None:
    """The smaller of an operation's own timeout and the time left; `expired` raised when none is left (a socket
    timeout of 0 would make the operation non-blocking, failing as a broken connection rather than a timeout)."""
    deadline = _current_deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the attempt's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # httpcore's stream writes a buffer with one `send` after another, each given the whole timeout: a server
        # taking a large body a piece at a time, each piece in time, would hold the call as long as it likes.
        # `sendall` spends one timeout on the whole buffer (on a TLS socket, where one `send` writes it all, too).
        sock = self._stream.get_extra_info("socket")
        sock.settimeout(_bounded(timeout, httpcore.WriteTimeout))
        try:
            sock.sendall(buffer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        stream = self._backend.connect_tcp(host, port, _bounded(timeout, httpcore.ConnectTimeout), local_address,
                                           socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        stream = self._backend.connect_unix_socket(path, _bounded(timeout, httpcore.ConnectTimeout), socket_options)
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core_error, httpx_error in _HTTPX_ERROR_FOR:
            if isinstance(exc, core_error):
                raise httpx_error(str(exc)) from exc
        raise


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors():
            yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


class DeadlineTransport(httpx.BaseTransport):
    """HTTP/1.1 to the host itself, each socket operation bounded by the deadline of the attempt it serves."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            network_backend=_DeadlineBackend())

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        with _as_httpx_errors():
            timeouts = _pool_wait_bounded(request.extensions.get("timeout", {}))
            core_request = httpcore.Request(
                method=request.method,
                url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
                headers=request.headers.raw, content=_request_body(request),
                extensions={**request.extensions, "timeout": timeouts})
            response = self._pool.handle_request(core_request)
        return httpx.Response(status_code=response.status, headers=response.headers, stream=_Body(response),
                              extensions=response.extensions)

    def close(self) -> None:
        self._pool.close()


def _pool_wait_bounded(timeouts: dict[str, float | None]) -> dict[str, float | None]:
    """httpx's timeouts, the wait for a pooled connection (every one busy with other calls) ending by the deadline."""
    return {**timeouts, "pool": _bounded(timeouts.get("pool"), httpcore.PoolTimeout)}


def _request_body(request: httpx.Request) -> Iterable[bytes]:
    if not isinstance(request.stream, Iterable):
        raise TypeError("a synchronous transport needs a synchronous request body")
    return request.stream
