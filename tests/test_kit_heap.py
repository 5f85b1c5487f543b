"""prism.kit.heap: memory freed after a large build goes back to the system."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from prism.kit.heap import release_freed_memory


def _resident_mib() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_freed_memory_of_a_worker_thread_is_returned() -> None:
    # What a registry build does: many mid-sized allocations on a worker thread (its own glibc heap), most
    # of them freed when it ends, one kept so the heap cannot shrink from its top by itself.
    kept: list[bytes] = []

    def build() -> None:
        scratch = [os.urandom(1) * 2000 for _ in range(60_000)]  # ~120 MB in blocks malloc serves itself
        kept.append(scratch[-1])
        del scratch

    worker = threading.Thread(target=build)
    worker.start()
    worker.join()
    before = _resident_mib()
    assert release_freed_memory() is True  # glibc: the machines Prism is built and tested on
    after = _resident_mib()
    assert before - after > 60, (before, after)
