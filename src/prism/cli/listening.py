"""Uvicorn, with Prism's start-up announcement made only once the server is listening.

The announcement (seeding the demo workspace, printing its one-time key) must not happen before the port is
bound and the workers serve: a start that fails there would have printed a key nobody can use yet, or seeded
one nobody saw. So the socket is bound here first (a port in use is a clean error, not a log line), and the
announcement runs after Uvicorn has started serving on it: inside the server for one process, in the
supervisor once every worker reports ready for several.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from prism.cli.output import report_error
from prism.cli.preflight import ConfigurationError
from prism.errors import PrismError

Announcement = Callable[[], Coroutine[Any, Any, None]]

# How long a supervisor waits for each worker process to serve (imports and app start-up on a busy machine).
WORKER_READY_SECONDS = 120.0


def bind_listener(host: str, port: int, *, workers: int = 1) -> socket.socket:
    """The server's socket, bound now so that a port in use stops the start before anything is written. For several
    workers it lets each of them bind a socket of its own to the same port (`worker_listener`); whether the port is
    in use is checked first without that option, which another server's sockets would otherwise share."""
    if workers > 1 and _SPREADS_CONNECTIONS:
        _bound(host, port, reuse_port=False).close()
        return _bound(host, port, reuse_port=True)
    return _bound(host, port, reuse_port=False)


def worker_listener(first: socket.socket) -> socket.socket:
    """Another socket on `first`'s address, for one worker of its own: the kernel spreads new connections over the
    sockets of a port (SO_REUSEPORT) by their addresses. On one shared socket a burst of connections opened together
    goes to whichever worker accepts first (bench/README.md measured 28-30 of 32 on one of two workers)."""
    host, port = first.getsockname()[:2]
    return _bound(host, port, reuse_port=True)


def spreads_connections(listener: socket.socket) -> bool:
    """Whether workers can have sockets of their own on this listener's port (Linux's SO_REUSEPORT balancing)."""
    return _SPREADS_CONNECTIONS and bool(listener.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT))


# Linux balances the sockets of one port; elsewhere SO_REUSEPORT only lets them share it (or is missing), so the
# workers share one socket there.
_SPREADS_CONNECTIONS = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")


def _bound(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        code = "address_in_use" if exc.errno == errno.EADDRINUSE else "cannot_listen"
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (--host, --port)",
                                 code=code) from None
    sock.set_inheritable(True)  # worker processes serve on it
    return sock


class AnnouncingServer(uvicorn.Server):
    """One serving process: announces after Uvicorn's start-up has put the socket into service."""

    def __init__(self, config: uvicorn.Config, announce: Announcement, *, as_json: bool) -> None:
        super().__init__(config)
        self.announce = announce
        self.as_json = as_json
        self.announcement_failed = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.started or self.should_exit:
            return
        try:
            await self.announce()
        except PrismError as exc:
            report_error(self.as_json, exc)
            self.announcement_failed = True
            self.should_exit = True


class AnnouncingSupervisor(Multiprocess):
    """Several worker processes on one socket: announces once every worker serves."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], announce: Announcement, *,
                 as_json: bool) -> None:
        super().__init__(config, sockets=sockets)
        self.announce = announce
        self.as_json = as_json
        self.announcement_failed = False

    def init_processes(self) -> None:
        # Each worker serves on a socket of its own where the kernel spreads connections over them
        # (`worker_listener`); the first serves on the server's socket. A worker Uvicorn starts again later (after a
        # crash, or SIGHUP) serves on the server's socket, sharing it.
        spread = spreads_connections(self.sockets[0])
        for index in range(self.processes_num):
            sockets = [worker_listener(self.sockets[0])] if spread and index > 0 else self.sockets
            process = Process(self.config, sockets)
            process.start()  # the worker has its own copy of its socket from here on
            self.processes.append(process)
            if sockets is not self.sockets:
                sockets[0].close()
        try:
            if not all(p.wait_until_ready(WORKER_READY_SECONDS, self.should_exit) for p in self.processes):
                raise PrismError("a worker process did not start; its error is above", code="worker_start_failed")
            asyncio.run(self.announce())
        except PrismError as exc:
            report_error(self.as_json, exc)
            self.announcement_failed = True
            self.should_exit.set()


def run_listening(config: uvicorn.Config, listener: socket.socket, announce: Announcement, *, as_json: bool) -> int:
    """Serve on `listener` until stopped; the process's exit code."""
    if config.workers > 1:
        supervisor = AnnouncingSupervisor(config, [listener], announce, as_json=as_json)
        supervisor.run()
        return 1 if supervisor.announcement_failed else 0
    server = AnnouncingServer(config, announce, as_json=as_json)
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    if server.announcement_failed:
        return 1
    return 0 if server.started else 3  # 3: Uvicorn's own code for a start-up that failed
