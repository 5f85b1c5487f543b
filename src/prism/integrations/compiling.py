"""OpenAPI descriptions imported through the API, compiled in a process of their own, bounded in time and memory.

Compiling a large description is seconds of work that holds the interpreter lock (GitHub's, as YAML: about 6 s of
libyaml building Python objects, then the compilation). On a thread of the serving process, every request of every
organization on that process waits its turn meanwhile: the event loop got the lock back about every 5 ms, and one
garbage collection of the parsed document held it for 1.8 s. A child process shares no lock with the server; it is
killed when it takes longer than `PRISM_INTEGRATION_COMPILE_SECONDS`, and its address space may grow by
`PRISM_INTEGRATION_COMPILE_MEMORY_MB`, so a description made to exhaust time or memory costs its importer a
refusal, not every other organization its latency.

Children are forked from multiprocessing's forkserver, started at the first import, which imports the compiler
once (about a second): each import then pays a fork, not an interpreter's start. The serving process itself is
never forked: it runs threads (executors, database drivers) whose locks a fork would copy mid-hold.
`MAX_COMPILES_AT_ONCE` children per process at most; an import beyond them is refused 503 `import_busy`. Each
child's whole life is watched by one thread, which frees its place only once the child is gone. A process told
to stop kills its children at once (`stop_all`) rather than wait for them.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkServerContext

from prism.errors import PrismError
from prism.integrations.openapi import SpecError
from prism.integrations.service import CompiledImport, compile_openapi

MAX_COMPILES_AT_ONCE = 2
_context_lock = threading.Lock()
_context: ForkServerContext | None = None


class ImportBusy(PrismError):
    code, status = "import_busy", 503


class ServerStopping(PrismError):
    """The process was told to stop (`stop_all`) while the import compiled."""

    code, status = "server_stopping", 503


# How many children compile at once in this process (any event loop, any thread), as LookupThreads bounds lookups.
_SLOTS = threading.BoundedSemaphore(MAX_COMPILES_AT_ONCE)


async def compile_apart(text: str | bytes, *, default_cost: int, seconds: float,
                        memory_mb: int) -> CompiledImport:
    """`service.compile_openapi(text)` run in a child process: its result, or what it raised (a `PrismError`, as
    it would have raised it here). `SpecError` when the child took longer than `seconds`, ran out of its
    `memory_mb` or ended without an answer; `ImportBusy` when MAX_COMPILES_AT_ONCE are running;
    `ServerStopping` when `stop_all` stopped it."""
    if not _SLOTS.acquire(blocking=False):
        raise ImportBusy(f"{MAX_COMPILES_AT_ONCE} descriptions are being compiled by this process; retry in a "
                         "few seconds")
    given_up, stops = threading.Event(), _stops
    running = asyncio.get_running_loop().run_in_executor(
        _THREADS, _child_life, text, default_cost, seconds, memory_mb, given_up, stops)
    try:
        # Shielded: a request given up (its client went away) must not leave the child unwatched. The thread
        # that owns it sees `given_up` within STOP_CHECK_SECONDS, kills it and gives its place back.
        outcome, exit_code = await asyncio.shield(running)
    except asyncio.CancelledError:
        given_up.set()
        raise
    if isinstance(outcome, CompiledImport):
        return outcome
    if isinstance(outcome, PrismError):
        raise outcome
    if outcome is _TIMED_OUT:
        raise SpecError(f"spec: compiling the description took longer than {seconds:g} s")
    # A stop signalled to the whole process group (systemd's default, `kill -TERM -<pgid>`) may end the child
    # itself before `stop_all` runs: ended without an answer while the server is stopping, it was the stop too.
    if outcome is _STOPPED or (outcome is None and _stops != stops):
        raise ServerStopping("this server is stopping, and stopped compiling the description: import it again in "
                             "a moment (another server, or this one once it is back, compiles it)")
    raise SpecError(f"spec: the description could not be compiled (the process compiling it ended with exit code "
                    f"{exit_code})")


_TIMED_OUT = "timed out"
_STOPPED = "stopped"
# How many times `stop_all` was called in this process: a child started before the last call is killed.
_stops = 0


def stop_all() -> None:
    """Kill every child compiling now (each by the thread watching it, within STOP_CHECK_SECONDS, which then frees
    its place); their imports are refused 503 `server_stopping`. Called as the process is told to stop
    (prism.cli.serve, on SIGTERM and SIGINT), before Uvicorn waits for the requests in flight, so that no
    compilation holds the stop for as long as it may take. Imports that start afterwards compile as usual. It only
    counts, so a signal handler may call it."""
    global _stops
    _stops += 1


# How often the thread watching a child looks whether its request was given up or the process told to stop.
STOP_CHECK_SECONDS = 0.1
# One thread per child at most (the slots bound them): waiting for a child never takes one of the event loop's
# default executor's few threads (six on two cores), which password checks and descriptors need.
_THREADS = ThreadPoolExecutor(max_workers=MAX_COMPILES_AT_ONCE, thread_name_prefix="prism-compile")


def _child_life(text: str | bytes, default_cost: int, seconds: float, memory_mb: int,
                given_up: threading.Event, stops: int) -> tuple[object, int | None]:
    """A child's whole life on one thread, so nothing can skip a part of it: started, its answer awaited (until
    `seconds` pass, `given_up` is set or `stop_all` is called after `stops` calls), killed if it is still running,
    reaped, its place given back. What it sent (or `_TIMED_OUT`, `_STOPPED`, or None when it ended without sending
    or was given up) and its exit code."""
    try:
        receiving, sending = _forkserver().Pipe(duplex=False)
        child = _forkserver().Process(target=_compile_in_child, args=(sending, text, default_cost, seconds, memory_mb),
                                      daemon=True, name="prism-openapi-compile")
        try:
            child.start()  # the first start waits for the forkserver to import the compiler (about a second)
        except BaseException:
            receiving.close()
            raise
        finally:
            sending.close()  # the child has its own copy; this one would keep the pipe open after it ended
        try:
            with receiving:
                outcome = _answer_of(receiving, child.sentinel, seconds, given_up, stops)
        finally:
            if child.is_alive():
                child.kill()
            child.join()
            exit_code = child.exitcode
            child.close()
        return outcome, exit_code
    finally:
        _SLOTS.release()


def _answer_of(receiving: Connection, sentinel: int, seconds: float, given_up: threading.Event,
               stops: int) -> object:
    deadline = time.monotonic() + seconds
    while not given_up.is_set():
        if _stops != stops:
            return _STOPPED
        left = deadline - time.monotonic()
        if left <= 0:
            return _TIMED_OUT
        ready = wait([receiving, sentinel], timeout=min(left, STOP_CHECK_SECONDS))
        if receiving in ready:
            try:
                return receiving.recv()
            except (EOFError, OSError):  # it ended while sending
                return None
        if ready:  # ended without sending
            return None
    return None


def _forkserver() -> ForkServerContext:
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            # Imported once, in the forkserver: the compiler, and the `prism` command's module, which every child
            # imports again otherwise (multiprocessing runs the main module, the command's script, in each child;
            # preloading "__main__" itself does nothing on Python 3.11: the forkserver is never told its path).
            context.set_forkserver_preload([__name__, "prism.cli.main"])
            _context = context
        return _context


def _compile_in_child(sending: Connection, text: str | bytes, default_cost: int, seconds: float,
                      memory_mb: int) -> None:
    """The child's whole life: cap its memory and its CPU time (so it ends by itself should its parent, which kills
    it at `seconds`, be gone), compile, send the result or the refusal. The memory cap is `memory_mb` beyond the
    address space the child starts with (what the forkserver imported: a few hundred MB, which it shares)."""
    limit = _address_space() + memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    cpu = math.ceil(seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard == resource.RLIM_INFINITY else min(cpu, hard), hard))
    outcome: CompiledImport | PrismError
    try:
        outcome = compile_openapi(text, default_cost=default_cost)
    except PrismError as exc:
        outcome = exc
    except MemoryError:
        outcome = SpecError(f"spec: compiling the description needs more than {memory_mb} MB")
    with sending:
        sending.send(outcome)


def _address_space() -> int:
    """This process's address space now, in bytes (0 where /proc does not tell)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0
