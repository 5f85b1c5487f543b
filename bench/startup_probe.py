"""Start-up split into its parts, in a fresh interpreter (run by bench/registry_scale.py).

    PRISM_BENCH_HANDLERS=10000 python -m bench.startup_probe

Imports nothing of Prism's server before the clock starts, so `import_prism_s` is what `prism serve`
pays too. Like `prism serve`, it pauses the garbage collector while the server's long-lived objects
are built and resumes it as the app's lifespan does (prism.kit.collector), timed as `start_serving_s`.
Prints one JSON line: seconds and VmRSS (MB) after each step.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from prism.kit.collector import pause_until_serving, start_serving


def rss_mb() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


def main() -> None:
    marks: dict[str, Any] = {"rss_at_start_mb": rss_mb()}
    pause_until_serving()
    start = time.perf_counter()
    import prism.app  # noqa: F401  (the import is what is being timed)

    marks["import_prism_s"] = time.perf_counter() - start
    marks["rss_after_import_mb"] = rss_mb()
    from bench import synthetic_app

    t = time.perf_counter()
    apps = synthetic_app.configured()
    marks["declare_handlers_s"] = time.perf_counter() - t  # HandlerApp.handler + parameter model classes
    marks["rss_after_declare_mb"] = rss_mb()
    from prism.registry.registry import build_registry

    t = time.perf_counter()
    registry = build_registry(synthetic_app.specs().split(","))
    marks["build_registry_s"] = time.perf_counter() - t  # load_app + Registry.freeze (a schema per handler)
    marks["rss_after_registry_mb"] = rss_mb()
    from prism.registry.search import index_for

    t = time.perf_counter()
    index_for(registry)
    marks["search_index_s"] = time.perf_counter() - t  # capability-search index, built by create_app
    marks["rss_after_index_mb"] = rss_mb()
    t = time.perf_counter()
    start_serving()
    [[n] for n in range(1000)]  # allocations that would set off a collection of all of start-up's objects
    marks["start_serving_s"] = time.perf_counter() - t  # what the app's lifespan does before serving
    marks["handlers"] = len(registry)
    marks["param_models"] = len({h.params for app in apps.values() for h in app.handlers})
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in marks.items()}))


if __name__ == "__main__":
    main()
