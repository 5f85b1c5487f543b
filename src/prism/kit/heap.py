"""Give memory freed after a large build back to the operating system.

Building a registry of imported integrations, or embedding every handler for semantic search, allocates and
frees hundreds of MB of short-lived objects (decoded JSON, tokenizer output, scratch arrays), much of it on a
worker thread. glibc keeps freed memory in each thread's heap for reuse and returns only what lies at a heap's
top: at 10,000 handlers about 80 MB stayed resident for nothing after start-up (bench/README.md, "Imported
integrations: memory and start-up"). `malloc_trim` returns every free page of every heap; it takes a few
milliseconds, so it runs only after those builds, never per request. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): their allocators return memory themselves
        return None
    return trim


def release_freed_memory() -> bool:
    """Return freed heap pages to the system; False where the C library has no `malloc_trim`."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
