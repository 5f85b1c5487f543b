"""Prism with 10,000 synthetic handlers: start-up time, memory, catalog and capability-search latency.

    python bench/registry_scale.py [--handlers 10000] [--requests 500] [--params distinct|shared]

Starts `prism serve` (one worker, fresh SQLite file) with bench/synthetic_app.py loaded through
PRISM_APPS, and measures: process start to the first successful ping (cold: migrations and demo
seed included; then a restart on the same file), VmRSS after start-up and after the warm requests,
and client-side latency of sequential GET /api/v1/dev/tools/ and capability_search requests over one
keep-alive connection. bench/startup_probe.py splits the start-up into its parts in a fresh interpreter.

Bytecode: an installed Prism has its modules compiled (pip does it at install), so the benchmark
compiles Prism's and its own sources first (into the usual `__pycache__` folders, git-ignored) and
lets the servers read that cache, even where the caller's environment sets PYTHONDONTWRITEBYTECODE;
without it every start compiled Prism's ~200 modules from source again (≈ 0.2 s).
"""

from __future__ import annotations

import argparse
import compileall
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.harness import PING_PATH, Server, bench_env, machine, percentile, proc_memory_kib, start_prism, write_result
from bench.synthetic_app import APPS, ENTITIES, plural, specs

TARGET_STARTUP_S = 3.0
TARGET_RSS_MB = 300.0
TARGET_SEARCH_P50_MS = 5.0
TOOLS_PATH = "/api/v1/dev/tools/"
INTROSPECT_PATH = "/api/v1/dev/introspect/"

# Tasks as an agent would phrase them; {e} is an entity, {a} an app of the synthetic surface.
QUERY_TEMPLATES = (
    "list open {es} in {a}", "approve a {e}", "how many {es} are overdue", "create a new {e}",
    "reject the {e} with a reason", "aging report of {es}", "change the owner of a {e}", "delete a {e}",
    "escalate an urgent {e}", "monthly trend of {es} in {a}", "sync {es} with the external system",
    "who changed this {e}", "notify the owner of a {e}", "close the {e} when done", "attach a file to a {e}",
    "forecast {es} for next quarter", "reconcile {es} against the bank statement", "assign a {e} to my team",
    "find the {e} by id", "variance of {es} against budget", "{a} {e} summary by status",
    "low stock spare parts to reorder", "overdue vendor invoices aging", "who am I",
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--handlers", type=int, default=10_000)
    p.add_argument("--requests", type=int, default=500, help="sequential requests per measured endpoint")
    p.add_argument("--params", choices=("distinct", "shared"), default="distinct",
                   help="one parameter model class per handler, or one per parameter shape")
    return p.parse_args()


def compile_sources() -> None:
    """What pip does at install: the bytecode cache of Prism and of the benchmark's synthetic apps."""
    repo = Path(__file__).resolve().parent.parent
    for tree in (repo / "src" / "prism", repo / "bench"):
        compileall.compile_dir(tree, quiet=1)


def queries(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        entity = rng.choice(ENTITIES).replace("_", " ")
        app = rng.choice(list(APPS)).replace("_", " ")
        out.append(QUERY_TEMPLATES[i % len(QUERY_TEMPLATES)].format(e=entity, es=plural(entity), a=app))
    return out


def timed(client: httpx.Client, requests: list[tuple[str, dict[str, str] | None]]) -> dict[str, Any]:
    """GET (path, query) one after the other; latency percentiles in ms and what came back."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    sizes: list[int] = []
    last: httpx.Response | None = None
    for path, query in requests:
        start = time.perf_counter()
        last = client.get(path, params=query)
        latencies.append((time.perf_counter() - start) * 1000)
        statuses[last.status_code] = statuses.get(last.status_code, 0) + 1
        sizes.append(len(last.content))
    latencies.sort()
    return {"requests": len(latencies), "p50_ms": round(percentile(latencies, 50), 3),
            "p90_ms": round(percentile(latencies, 90), 3), "p99_ms": round(percentile(latencies, 99), 3),
            "max_ms": round(latencies[-1], 3), "statuses": statuses, "mean_bytes": round(sum(sizes) / len(sizes)),
            "last_body": last.text[:300] if last is not None else ""}


def measure_requests(server: Server, key: str, count: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
        catalog = client.get(TOOLS_PATH).raise_for_status().json()
        handler_count = sum(t.get("handler_count", 0) for t in catalog["tools"])
        # The same client and connection for a ping baseline: what HTTP + httpx cost without Prism's work.
        ping = timed(client, [(PING_PATH, None)] * count)
        tools = timed(client, [(TOOLS_PATH, None)] * count)
        search = timed(client, [(INTROSPECT_PATH, {"dimension": "capability_search", "query": q})
                                for q in queries(count)])
        sample = client.get(INTROSPECT_PATH, params={"dimension": "capability_search",
                                                     "query": "approve a purchase order"})
    search["available"] = search["statuses"].get(200, 0) == count
    return {"visible_handlers": handler_count, "ping": ping, "tools": tools, "capability_search": search,
            "search_sample": sample.json() if sample.status_code == 200 else sample.text[:300]}


def memory_mb(pid: int) -> dict[str, float]:
    return {k: round(v / 1024, 1) for k, v in proc_memory_kib(pid).items()}


def run_probe(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.startup_probe"], env=env,
                          capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def start_and_measure(phase: str, workdir: Path, extra: dict[str, str], requests: int) -> dict[str, Any]:
    server, banner = start_prism(database_url=f"sqlite:///{workdir / 'prism.db'}", cwd=workdir,
                                 log_path=workdir / f"{phase}.log", extra_env=extra)
    try:
        startup = server.wait_ready(timeout=300)
        entry: dict[str, Any] = {"startup_s": round(startup, 3), "rss_after_startup": memory_mb(server.pid)}
        if requests:
            entry |= measure_requests(server, banner["api_key"], requests)
            entry["rss_after_requests"] = memory_mb(server.pid)
        return entry
    finally:
        server.stop()


def main() -> None:
    args = parse_args()
    extra = {"PRISM_APPS": specs(), "PRISM_BENCH_HANDLERS": str(args.handlers), "PRISM_BENCH_PARAMS": args.params}
    compile_sources()
    extra["PYTHONDONTWRITEBYTECODE"] = ""  # empty is unset for Python: read (and keep) the cache
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report: dict[str, Any] = {"benchmark": "registry_scale", "started_at": stamp, "machine": machine(),
                              "settings": {"handlers": args.handlers, "requests": args.requests,
                                           "params": args.params}}
    report["startup_breakdown"] = run_probe(bench_env(**extra))
    with tempfile.TemporaryDirectory(prefix="prism-registry-") as tmp:
        # Cold: an empty file, so migrations and the demo seed are part of it. Restart: the same file again.
        report["cold"] = start_and_measure("cold", Path(tmp), extra, args.requests)
        report["restart"] = start_and_measure("restart", Path(tmp), extra, 0)
    cold, search = report["cold"], report["cold"]["capability_search"]
    report["targets"] = {
        "startup_lt_3s": {"cold": cold["startup_s"] < TARGET_STARTUP_S,
                          "restart": report["restart"]["startup_s"] < TARGET_STARTUP_S},
        "rss_lt_300mb": max(cold["rss_after_requests"]["VmRSS"], cold["rss_after_startup"]["VmRSS"]) < TARGET_RSS_MB,
        "capability_search_p50_lt_5ms": (search["p50_ms"] < TARGET_SEARCH_P50_MS) if search["available"] else None,
    }
    print_summary(report, write_result(f"registry-scale-{args.params}-{stamp}", report))


def print_summary(r: dict[str, Any], path: Path) -> None:
    cold, restart, b = r["cold"], r["restart"], r["startup_breakdown"]
    print(f"\n{cold['visible_handlers']} handlers visible to the demo key ({r['settings']['params']} param models)")
    print(f"start-up to first ping: cold {cold['startup_s']} s, restart {restart['startup_s']} s "
          f"(import {b['import_prism_s']} s, declare {b['declare_handlers_s']} s, "
          f"build registry {b['build_registry_s']} s, search index {b['search_index_s']} s)")
    print(f"VmRSS: after start-up {cold['rss_after_startup']['VmRSS']} MB, after requests "
          f"{cold['rss_after_requests']['VmRSS']} MB (peak {cold['rss_after_requests']['VmHWM']} MB)")
    print("| endpoint | p50 ms | p90 ms | p99 ms | max ms | statuses | mean bytes |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name in ("ping", "tools", "capability_search"):
        s = cold[name]
        print(f"| {name} | {s['p50_ms']} | {s['p90_ms']} | {s['p99_ms']} | {s['max_ms']} | {s['statuses']} "
              f"| {s['mean_bytes']} |")
    print(f"targets: {json.dumps(r['targets'])}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
