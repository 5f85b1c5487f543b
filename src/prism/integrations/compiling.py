"""OpenAPI descriptions imported through the API, compiled in a process of their own, bounded in time and memory.

Compiling a large description is seconds of work that holds the interpreter lock (GitHub's, as YAML: about 6 s of
libyaml building Python objects, then the compilation). On a thread of the serving process, every request of every
organization on that process waits its turn meanwhile: the event loop got the lock back about every 5 ms, and one
garbage collection of the parsed document held it for 1.8 s. A child process shares no lock with the server; it is
killed when it takes longer than `PRISM_INTEGRATION_COMPILE_SECONDS`, and its address space is capped at
`PRISM_INTEGRATION_COMPILE_MEMORY_MB`, so a description made to exhaust time or memory costs its importer a
refusal, not every other organization its latency.

Children are forked from multiprocessing's forkserver, started at the first import, which imports the compiler
once (about a second): each import then pays a fork, not an interpreter's start. The serving process itself is
never forked: it runs threads (executors, database drivers) whose locks a fork would copy mid-hold.
`MAX_COMPILES_AT_ONCE` children per process at most; an import beyond them is refused 503 `import_busy`.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import threading
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess

from prism.errors import PrismError
from prism.integrations.openapi import SpecError
from prism.integrations.service import CompiledImport, compile_openapi

MAX_COMPILES_AT_ONCE = 2
_context_lock = threading.Lock()
_context: ForkServerContext | None = None


class ImportBusy(PrismError):
    code, status = "import_busy", 503


class _Slots:
    """How many children compile at once in this process (any event loop, any thread)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.taken = 0
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.taken >= self.size:
                return False
            self.taken += 1
            return True

    def give(self) -> None:
        with self.lock:
            self.taken -= 1


_SLOTS = _Slots(MAX_COMPILES_AT_ONCE)


async def compile_apart(text: str | bytes, *, default_cost: int, seconds: float,
                        memory_mb: int) -> CompiledImport:
    """`service.compile_openapi(text)` run in a child process: its result, or what it raised (a `PrismError`, as
    it would have raised it here). `SpecError` when the child took longer than `seconds`, ran out of its
    `memory_mb` or ended without an answer; `ImportBusy` when MAX_COMPILES_AT_ONCE are running."""
    if not _SLOTS.take():
        raise ImportBusy(f"{MAX_COMPILES_AT_ONCE} descriptions are being compiled by this process; retry in a "
                         "few seconds")
    try:
        receiving, sending = _forkserver().Pipe(duplex=False)
        child = _forkserver().Process(target=_compile_in_child, args=(sending, text, default_cost, memory_mb),
                                      daemon=True, name="prism-openapi-compile")
        try:
            # Off the loop: the first start waits for the forkserver to import the compiler, and every start writes
            # the description to the child.
            await asyncio.to_thread(child.start)
        finally:
            sending.close()  # the child has its own copy; this one would keep the pipe open after it ended
        try:
            outcome = await asyncio.to_thread(_answer_of, receiving, child.sentinel, seconds)
        finally:
            exit_code = await asyncio.to_thread(_ended, child)  # killed if still running (a timeout, a cancel)
    finally:
        _SLOTS.give()
    if isinstance(outcome, CompiledImport):
        return outcome
    if isinstance(outcome, PrismError):
        raise outcome
    if outcome is _TIMED_OUT:
        raise SpecError(f"spec: compiling the description took longer than {seconds:g} s")
    raise SpecError(f"spec: the description could not be compiled (the process compiling it ended with exit code "
                    f"{exit_code})")


_TIMED_OUT = "timed out"


def _answer_of(receiving: Connection, sentinel: int, seconds: float) -> object:
    """What the child sent, `_TIMED_OUT`, or None when it ended without sending. Closes `receiving`."""
    with receiving:
        ready = wait([receiving, sentinel], timeout=seconds)
        if receiving not in ready:
            return _TIMED_OUT if not ready else None
        try:
            return receiving.recv()
        except (EOFError, OSError):  # it ended while sending
            return None


def _ended(child: BaseProcess) -> int | None:
    """The child's exit code, once it has ended: killed if it was still running."""
    if child.is_alive():
        child.kill()
    child.join()
    exit_code = child.exitcode
    child.close()
    return exit_code


def _forkserver() -> ForkServerContext:
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            # Imported once, in the forkserver: the compiler, and the main module, which multiprocessing imports in
            # every child otherwise (the `prism` command's own imports: about a second each time).
            context.set_forkserver_preload(["__main__", __name__])
            _context = context
        return _context


def _compile_in_child(sending: Connection, text: str | bytes, default_cost: int, memory_mb: int) -> None:
    """The child's whole life: cap its memory, compile, send the result or the refusal."""
    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    outcome: CompiledImport | PrismError
    try:
        outcome = compile_openapi(text, default_cost=default_cost)
    except PrismError as exc:
        outcome = exc
    except MemoryError:
        outcome = SpecError(f"spec: compiling the description needs more than {memory_mb} MB")
    with sending:
        sending.send(outcome)
