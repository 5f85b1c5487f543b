"""Keep Python's cyclic garbage collector out of start-up.

Start-up allocates well over a million objects that live as long as the process (modules, one pydantic
class per handler, schemas, the search index) and almost no garbage. The collector, triggered by the
count of allocations, walks that growing heap again and again for nothing: with 10,000 handlers it was
about half of the time spent declaring them and a third of the imports. Switching it back on is not
free either: the next allocation starts a collection of everything allocated meanwhile (0.3 s for
10,000 handlers). Only `gc.freeze()` moves those objects out of its reach at no cost, so a server
that paused the collector resumes it after freezing, once start-up is over (`prism.cli.serve.serving_app`).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_paused_until_serving = False
_server_process = False  # set by prism serve: the collector is Prism's to tune
_pause_lock = threading.Lock()
_pauses = 0  # blocks inside collector_paused, in any thread
_resume = False  # whether the first of them found the collector running


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic collection for the block. Blocks may overlap, in one thread or several (a refresh on the
    event loop, an index built on a worker thread): the collector resumes when the last one ends, if it ran
    before the first began."""
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def pause_until_serving() -> None:
    """For a process about to become a server: no collection until `start_serving` (prism serve)."""
    global _paused_until_serving
    if gc.isenabled():
        gc.disable()
        _paused_until_serving = True


def start_serving() -> None:
    """Start-up is over: freeze what it built, and resume the collector if start-up paused it."""
    global _paused_until_serving, _server_process
    _server_process = True
    gc.freeze()
    if _paused_until_serving:
        _paused_until_serving = False
        gc.enable()


@contextmanager
def paused_in_server() -> Iterator[None]:
    """`collector_paused` in a server process (once `start_serving` ran). Elsewhere (tests, an app embedded in
    another program) the process's collector is not Prism's to tune, and nothing changes: a pause there would
    also pause collection for whatever else runs on the event loop meanwhile."""
    if not _server_process:
        yield
        return
    with collector_paused():
        yield


@contextmanager
def building_long_lived() -> Iterator[None]:
    """In a server process: a build of long-lived objects (a registry of imported integrations and its search
    index: hundreds of thousands of objects) runs with the collector paused, and what it built is frozen
    afterwards, so that no full collection walks it again (at 10,000 handlers one took 0.2 s, a stall of every
    request in the process, each time it ran). A registry that is replaced later is freed by reference counting;
    only what it held in reference cycles stays, once per refresh. Elsewhere nothing changes (`paused_in_server`)."""
    with paused_in_server():
        yield
    if _server_process:
        gc.freeze()
