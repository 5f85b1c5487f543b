"""The sync client's timeout bounds the parts of an attempt that are not reading the answer: waiting for a pooled
connection, and writing a large body (reading the answer: test_client_retries.py).

The servers are raw loopback sockets that accept and then never answer, holding the connection, or take the
request's bytes slowly.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import httpx
import pytest
from prism_client import PrismClient, PrismError, PrismTimeoutError
from prism_client.deadline import DeadlineTransport, deadline_after

Handler = Callable[[socket.socket, threading.Event], None]


@contextmanager
def raw_server(handle: Handler, *, receive_buffer: int | None = None) -> Iterator[tuple[str, threading.Event]]:
    """A loopback TCP server giving each connection to `handle` on a thread of its own, until the block ends.

    Yields its base URL and an event set once a connection was accepted.
    """
    listener = socket.socket()
    if receive_buffer:  # before listen, so that accepted connections advertise a window this small
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)
    stop, accepted = threading.Event(), threading.Event()
    connections: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connections.append(connection)
            accepted.set()
            threading.Thread(target=handle, args=(connection, stop), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for connection in connections:
            connection.close()


def hold(connection: socket.socket, stop: threading.Event) -> None:
    """Never answer: the connection stays busy until the server stops."""
    stop.wait()


def read_slowly(connection: socket.socket, stop: threading.Event) -> None:
    """Take the request 64 KiB every 25 ms (about 2.5 MB/s) and never answer."""
    with suppress(OSError):
        while not stop.is_set() and connection.recv(64 * 1024):
            time.sleep(0.025)


def _in_background(call: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        with suppress(httpx.HTTPError, PrismError):  # the held call ends broken, when the server stops
            call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_call_waiting_for_a_pooled_connection_gives_up_at_its_timeout() -> None:
    # A pool of one connection, held by a call the server never answers (allowed 10 s): the next call waits for the
    # connection only until its own 0.5 s are up, not until the first call ends.
    with raw_server(hold) as (base_url, accepted):
        transport = DeadlineTransport(httpx.Limits(max_connections=1))
        with PrismClient(base_url, timeout=10, max_retries=0, transport=transport) as patient:
            first = _in_background(patient.ping)
            assert accepted.wait(5)
            started = time.monotonic()
            with pytest.raises(PrismTimeoutError):
                PrismClient(base_url, timeout=0.5, max_retries=0, transport=transport).ping()
            elapsed = time.monotonic() - started
    first.join(timeout=5)
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s timeout"


def test_the_deadline_bounds_the_wait_for_a_pooled_connection_whatever_httpx_would_wait() -> None:
    # The transport on its own, under httpx's 10 s pool timeout: the attempt's deadline ends the wait.
    with raw_server(hold) as (base_url, accepted):
        with httpx.Client(transport=DeadlineTransport(httpx.Limits(max_connections=1)), timeout=10) as http:
            first = _in_background(lambda: http.get(base_url))
            assert accepted.wait(5)
            started = time.monotonic()
            with deadline_after(0.5), pytest.raises(httpx.PoolTimeout):
                http.get(base_url)
            elapsed = time.monotonic() - started
    first.join(timeout=5)
    assert 0.45 <= elapsed < 1.0, f"gave up after {elapsed:.2f} s, not at the 0.5 s deadline"


def test_timeout_bounds_the_writing_of_a_large_body_to_a_slow_reader() -> None:
    # The server takes the 16 MB body steadily, in about 6 s: each time the socket has room again well within the
    # 2 s timeout. (A server taking a byte now and then would not show it: the socket never has room again, and
    # the send waiting for it times out on its own.)
    with raw_server(read_slowly, receive_buffer=64 * 1024) as (base_url, _):
        with PrismClient(base_url, timeout=2.0, max_retries=0) as prism:
            started = time.monotonic()
            with pytest.raises(PrismTimeoutError):
                prism.call("prism_whoami", {"padding": "x" * 16_000_000})
            elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"gave up after {elapsed:.2f} s, not at the 2 s timeout"
