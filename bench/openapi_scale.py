"""The tenant descriptor with 10,000 synthetic handlers: first build, then cached answers and 304s.

    python bench/openapi_scale.py [--handlers 10000] [--requests 200] [--params distinct|shared] [--hosts 16]

Starts `prism serve` (one worker, fresh SQLite file) with the handlers of bench/synthetic_app.py loaded
through PRISM_APPS and measures, client-side over one keep-alive
connection: the first GET /.well-known/openapi.json of a key (the document is built and cached for its
grant), then sequential cached GETs (gzip, as httpx asks, and identity), conditional GETs answered 304,
and the anonymous descriptor; then gzip GETs whose Host names one of `--hosts` ports in turn (one document
serves every host and port a Host header names). Target: cached answers under 50 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.harness import machine, percentile, proc_memory_kib, start_prism, write_result
from bench.synthetic_app import specs

PATH = "/.well-known/openapi.json"
TARGET_CACHED_P99_MS = 50.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--handlers", type=int, default=10_000)
    p.add_argument("--requests", type=int, default=200, help="sequential requests per measured case")
    p.add_argument("--params", choices=("distinct", "shared"), default="distinct")
    p.add_argument("--hosts", type=int, default=16, help="Host ports taken in turn by the rotating case")
    return p.parse_args()


def timed(client: httpx.Client, headers: dict[str, str], count: int, hosts: list[str] | None = None
          ) -> dict[str, Any]:
    """Sequential GETs: time to the response headers (the server's answer from cache) and to the last byte;
    with `hosts`, each request names the next one in turn."""
    first_byte: list[float] = []
    total: list[float] = []
    statuses: dict[int, int] = {}
    size = wire = 0
    for i in range(count):
        sent = {**headers, "Host": hosts[i % len(hosts)]} if hosts else headers
        start = time.perf_counter()
        with client.stream("GET", PATH, headers=sent) as response:
            first_byte.append((time.perf_counter() - start) * 1000)
            size = len(response.read())
            wire = response.num_bytes_downloaded
        total.append((time.perf_counter() - start) * 1000)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    first_byte.sort()
    total.sort()
    return {"requests": count, "ttfb_p50_ms": round(percentile(first_byte, 50), 3),
            "ttfb_p99_ms": round(percentile(first_byte, 99), 3), "p50_ms": round(percentile(total, 50), 3),
            "p90_ms": round(percentile(total, 90), 3), "p99_ms": round(percentile(total, 99), 3),
            "max_ms": round(total[-1], 3), "statuses": statuses, "bytes": size, "wire_bytes": wire}


def first(client: httpx.Client, headers: dict[str, str]) -> dict[str, Any]:
    start = time.perf_counter()
    response = client.get(PATH, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    document = response.json()
    return {"ms": round(elapsed, 1), "bytes": len(response.content), "paths": len(document["paths"]),
            "etag": response.headers["etag"]}


def measure(base_url: str, key: str, count: int, host_count: int) -> dict[str, Any]:
    keyed = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base_url, timeout=120) as client:
        report: dict[str, Any] = {"first_keyed": first(client, keyed), "first_anonymous": first(client, {})}
        report["cached_keyed"] = timed(client, keyed, count)  # httpx asks for gzip
        report["cached_keyed_identity"] = timed(client, {**keyed, "Accept-Encoding": "identity"}, count)
        report["not_modified_keyed"] = timed(client, {**keyed, "If-None-Match": report["first_keyed"]["etag"]},
                                             count)
        report["cached_anonymous"] = timed(client, {}, count)
        hosts = [f"localhost:{20000 + i}" for i in range(host_count)]
        timed(client, keyed, host_count, hosts)  # each host once, so a cache per host would be warm
        report["cached_keyed_rotating_hosts"] = timed(client, keyed, count, hosts)
    return report


def main() -> None:
    args = parse_args()
    extra = {"PRISM_APPS": specs(), "PRISM_BENCH_HANDLERS": str(args.handlers), "PRISM_BENCH_PARAMS": args.params,
             "PRISM_RATE_LIMIT_AUTHENTICATED": "1000000", "PRISM_RATE_LIMIT_ADMIN": "1000000"}
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report: dict[str, Any] = {"benchmark": "openapi_scale", "started_at": stamp, "machine": machine(),
                              "settings": {"handlers": args.handlers, "requests": args.requests,
                                           "params": args.params, "hosts": args.hosts}}
    with tempfile.TemporaryDirectory(prefix="prism-openapi-") as tmp:
        server, banner = start_prism(database_url=f"sqlite:///{Path(tmp) / 'prism.db'}", cwd=Path(tmp),
                                     log_path=Path(tmp) / "serve.log", extra_env=extra)
        try:
            server.wait_ready(timeout=300)
            report |= measure(server.base_url, banner["api_key"], args.requests, args.hosts)
            report["rss_mb"] = round(proc_memory_kib(server.pid)["VmRSS"] / 1024, 1)
        finally:
            server.stop()
    report["targets"] = {"cached_p99_lt_50ms": report["cached_keyed"]["p99_ms"] < TARGET_CACHED_P99_MS,
                         "cached_first_byte_p99_lt_50ms": report["cached_keyed"]["ttfb_p99_ms"] < TARGET_CACHED_P99_MS}
    print_summary(report, write_result(f"openapi-scale-{args.params}-{stamp}", report))


def print_summary(r: dict[str, Any], path: Path) -> None:
    k, a = r["first_keyed"], r["first_anonymous"]
    print(f"\n{k['paths']} paths in the descriptor of the demo key ({r['settings']['params']} param models); "
          f"{k['bytes'] / 1e6:.1f} MB; first (build) {k['ms']} ms; anonymous: {a['paths']} paths, "
          f"{a['bytes']} bytes, first {a['ms']} ms; VmRSS {r['rss_mb']} MB")
    print("| case | first byte p50 ms | first byte p99 ms | last byte p50 ms | p90 ms | p99 ms | max ms "
          "| statuses | bytes | on the wire |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for name in ("cached_keyed", "cached_keyed_identity", "not_modified_keyed", "cached_anonymous",
                 "cached_keyed_rotating_hosts"):
        s = r[name]
        print(f"| {name} | {s['ttfb_p50_ms']} | {s['ttfb_p99_ms']} | {s['p50_ms']} | {s['p90_ms']} | {s['p99_ms']} "
              f"| {s['max_ms']} | {s['statuses']} | {s['bytes']} | {s['wire_bytes']} |")
    print(f"targets: {json.dumps(r['targets'])}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
