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
from collections.abc import Iterator
from contextlib import contextmanager

_paused_until_serving = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic collection for the block; nested blocks leave the outermost one in charge."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def pause_until_serving() -> None:
    """For a process about to become a server: no collection until `start_serving` (prism serve)."""
    global _paused_until_serving
    if gc.isenabled():
        gc.disable()
        _paused_until_serving = True


def start_serving() -> None:
    """Start-up is over: freeze what it built, and resume the collector if start-up paused it."""
    global _paused_until_serving
    gc.freeze()
    if _paused_until_serving:
        _paused_until_serving = False
        gc.enable()
