"""Governed dispatch vs the floor, under the same wrk load, in one run.

    python bench/dispatch.py [--duration 15] [--connections 32] [--database-url postgresql://...]

Governed: `POST /api/mcp/tools/prism_entity_crud/` reading one seeded spare part through `prism serve`
(one Uvicorn worker, audit ledger on). Floor: bench/floor_app.py answering the same bytes on the same
Uvicorn settings. Afterwards the audit chain is verified and its entry count reported, which proves
every governed call was audited. Raw wrk reports and a JSON summary go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.harness import (
    LOOPBACK,
    RESULTS,
    Server,
    bench_env,
    children_cpu_seconds,
    free_port,
    machine,
    named_process_cpu_seconds,
    pinned,
    postgres_cpu_seconds,
    prism_cli,
    spawn,
    start_prism,
    system_busy_seconds,
    tree_cpu_seconds,
    write_result,
)
from bench.loadgen import run_wrk, write_post_script
from bench.pgdb import throwaway_database

TOOL_PATH = "/api/mcp/tools/prism_entity_crud/"
TARGET_RATIO = 0.5
TARGET_P99_MS = 25.0


@dataclass(frozen=True)
class Plan:
    """The load both sides get, identically."""

    connections: int
    threads: int
    duration: float
    warmup: float
    server_cpus: str | None
    wrk_cpus: str | None
    db_name: str | None  # the run's PostgreSQL database (the whole server's CPU is accounted)
    raw_log: Path
    rounds: int = 1  # governed then floor, this many times over
    workers: int = 1  # Uvicorn worker processes of each side
    redis_url: str | None = None  # PRISM_REDIS_URL of the governed side


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=15.0, help="measured seconds per target")
    p.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds per target before measuring")
    p.add_argument("--connections", type=int, default=32)
    # On 2 cores a second wrk thread only competes with the server for CPU; one thread drives well
    # over what one Uvicorn worker answers, so the server stays the bottleneck.
    p.add_argument("--threads", type=int, default=1, help="wrk threads")
    p.add_argument("--database-url", default=None,
                   help="postgresql://user@host:port/prism_bench* (created now, dropped after); default SQLite")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure the two sides alternately this many times; the ratio is the median of the rounds'")
    p.add_argument("--workers", type=int, default=1, help="Uvicorn workers of each side (PostgreSQL only)")
    p.add_argument("--redis-url", default=None, help="PRISM_REDIS_URL for the governed side (shared limits)")
    p.add_argument("--pin", action="store_true",
                   help="put the servers on CPU 0 and wrk on the other CPUs (steadier only on an idle machine)")
    return p.parse_args()


def cpu_sets(pin: bool) -> tuple[str | None, str | None]:
    """Server on CPU 0, wrk on the rest: the load generator must not steal the worker's core."""
    count = os.cpu_count() or 1
    if not pin or count < 2:
        return None, None
    return "0", f"1-{count - 1}"


def capture(base_url: str, key: str) -> tuple[bytes, bytes]:
    """(request body, governed response body) for reading the first seeded spare part."""
    envelope: dict[str, Any] = {"app": "spare_parts", "entity": "spare_part", "operation": "list",
                                "arguments": {"page_size": 1}}
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as client:
        listed = client.post(TOOL_PATH, json=envelope).raise_for_status().json()
        part_id = listed["data"]["items"][0]["id"]
        body = json.dumps({**envelope, "operation": "read", "arguments": {"id": part_id}}).encode()
        answer = client.post(TOOL_PATH, content=body, headers={"Content-Type": "application/json"})
    if answer.status_code != 200 or not answer.json().get("success"):
        raise RuntimeError(f"governed read failed: {answer.status_code} {answer.text}")
    return body, answer.content


def start_floor(body_file: Path, *, cwd: Path, cpus: str | None, workers: int) -> Server:
    port = free_port()
    command = pinned([sys.executable, "-m", "uvicorn", "bench.floor_app:app", "--host", LOOPBACK,
                      "--port", str(port), "--workers", str(workers), "--loop", "uvloop", "--http", "httptools",
                      "--no-access-log", "--no-server-header", "--no-proxy-headers", "--log-level", "warning"], cpus)
    env = bench_env(PRISM_BENCH_FLOOR_BODY=str(body_file), PRISM_BENCH_FLOOR_PATH=TOOL_PATH)
    return spawn("floor", command, env=env, cwd=cwd, port=port, log_path=cwd / "floor.log")


def measure(server: Server, script: Path, plan: Plan) -> dict[str, Any]:
    """Warm up, then measure: wrk's numbers plus where the machine's CPU went meanwhile."""
    def wrk(phase: str, seconds: float) -> Any:
        with plan.raw_log.open("a") as log:
            log.write(f"### {server.name}: {phase}\n")
        return run_wrk(server.base_url, script, connections=plan.connections, threads=plan.threads,
                       duration=seconds, cpus=plan.wrk_cpus, raw_log=plan.raw_log)

    warm = wrk("warm-up", plan.warmup)
    before = cpu_now(server.pid, plan.db_name)
    result = wrk("measured", plan.duration)
    after = cpu_now(server.pid, plan.db_name)
    seconds = result.duration_us / 1e6
    server_cpu, wrk_cpu, db_cpu, redis_cpu, busy = ((a - b) / seconds for a, b in zip(after, before, strict=True))
    # CPU per request of what serves it: Prism, its PostgreSQL backends and Redis, together (µs).
    serving_us = (server_cpu + db_cpu + redis_cpu) / result.rps * 1e6 if result.rps else 0.0
    return {**result.summary(), "p50_ms": result.p50_us / 1000, "p99_ms": result.p99_us / 1000,
            "warmup_requests": warm.requests, "server_cpu_cores": round(server_cpu, 2),
            "wrk_cpu_cores": round(wrk_cpu, 2), "postgres_cpu_cores": round(db_cpu, 2),
            "redis_cpu_cores": round(redis_cpu, 2), "serving_cpu_us_per_request": round(serving_us, 1),
            # Anything else busy on the machine (other jobs) skews a run; recorded so it can be judged.
            "other_cpu_cores": round(max(0.0, busy - server_cpu - wrk_cpu - db_cpu - redis_cpu), 2)}


def cpu_now(pid: int, db_name: str | None) -> tuple[float, float, float, float, float]:
    """CPU seconds so far: the server, finished wrk runs, the PostgreSQL server (when the run uses one), Redis, the
    whole machine."""
    return (tree_cpu_seconds(pid), children_cpu_seconds(), postgres_cpu_seconds() if db_name else 0.0,
            named_process_cpu_seconds("redis-server"), system_busy_seconds())


def run(database_url: str, workdir: Path, plan: Plan) -> dict[str, Any]:
    """Both sides under the same load, then the audit chain of the governed side."""
    servers: list[Server] = []
    try:
        redis = {"PRISM_REDIS_URL": plan.redis_url} if plan.redis_url else {}
        prism, banner = start_prism(database_url=database_url, cwd=workdir, log_path=workdir / "prism.log",
                                    cpus=plan.server_cpus, workers=plan.workers, extra_env=redis)
        servers.append(prism)
        prism.wait_ready()
        key = banner["api_key"]
        request_body, response_body = capture(prism.base_url, key)
        (workdir / "body.json").write_bytes(response_body)
        floor = start_floor(workdir / "body.json", cwd=workdir, cpus=plan.server_cpus, workers=plan.workers)
        servers.append(floor)
        floor.wait_ready()
        if httpx.post(floor.base_url + TOOL_PATH, content=request_body).content != response_body:
            raise RuntimeError("the floor does not answer the governed bytes")
        script = write_post_script(workdir / "post.lua", url_path=TOOL_PATH, body=request_body, bearer=key)
        # Alternating rounds: on a shared VM the floor's rate can jump between runs a minute apart, so each
        # round's governed side is compared with the floor measured right after it.
        rounds = []
        for _ in range(max(1, plan.rounds)):
            governed = measure(prism, script, plan)
            floor_side = measure(floor, script, plan)
            rounds.append({"governed": governed, "floor": floor_side,
                           "ratio_rps": round(governed["rps"] / floor_side["rps"], 3)})
    finally:
        for server in servers:
            server.stop()
    audit = prism_cli(["audit", "verify", "--tenant", "demo"], database_url=database_url, cwd=workdir)
    entries = sum(log["tree_size"] + log["waiting"] for log in audit["logs"])
    # Setup made two governed calls (list + the captured read); wrk counts only answered requests,
    # so the ledger may hold a few more entries (calls still in flight when wrk stopped).
    counted = sum(r["governed"]["warmup_requests"] + r["governed"]["requests"] for r in rounds) + 2
    median = sorted(rounds, key=lambda r: r["ratio_rps"])[(len(rounds) - 1) // 2]  # the lower middle when even
    governed, floor_side, ratio = median["governed"], median["floor"], median["ratio_rps"]
    return {
        "request_bytes": len(request_body), "response_bytes": len(response_body),
        "governed": governed, "floor": floor_side, "ratio_rps": ratio, "rounds": rounds,
        "targets": {"ratio_ge_0_5": ratio >= TARGET_RATIO, "governed_p99_lt_25ms": governed["p99_ms"] < TARGET_P99_MS},
        "audit": {"valid": audit["valid"], "entries": entries, "governed_calls_counted": counted,
                  "all_calls_audited": audit["valid"] and entries >= counted, "logs": audit["logs"]},
    }


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required: apt-get install -y wrk")
    server_cpus, wrk_cpus = cpu_sets(args.pin)
    backend = "postgresql" if args.database_url else "sqlite"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw_log = RESULTS / f"dispatch-{backend}-{stamp}.wrk.txt"
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prism-bench-")))
        db_name = stack.enter_context(throwaway_database(args.database_url)) if args.database_url else None
        database_url = args.database_url or f"sqlite:///{workdir / 'prism.db'}"
        plan = Plan(args.connections, args.threads, args.duration, args.warmup, server_cpus, wrk_cpus, db_name,
                    raw_log, args.rounds, args.workers, args.redis_url)
        outcome = run(database_url, workdir, plan)
    report: dict[str, Any] = {
        "benchmark": "dispatch", "backend": backend, "started_at": stamp, "machine": machine(),
        "settings": {"duration_s": args.duration, "warmup_s": args.warmup, "rounds": args.rounds,
                     "connections": args.connections,
                     "threads": args.threads, "server_cpus": server_cpus, "wrk_cpus": wrk_cpus,
                     "workers": args.workers, "redis": bool(args.redis_url),
                     "uvicorn": "uvloop, httptools, access log, server header and proxy headers off"},
        **outcome, "raw_wrk_log": str(raw_log.relative_to(RESULTS.parent.parent)),
    }
    print_summary(report, write_result(f"dispatch-{backend}-{stamp}", report))


def print_summary(r: dict[str, Any], path: Path) -> None:
    g, f = r["governed"], r["floor"]
    print(f"\n{r['backend']}: {r['settings']['connections']} connections, {r['settings']['duration_s']:g} s")
    print("| side | req/s | p50 ms | p99 ms | max ms | errors | CPU cores: server / wrk / postgres / redis / other "
          "| serving CPU µs/request |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, s in (("governed", g), ("floor", f)):
        print(f"| {name} | {s['rps']:,.0f} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} | {s['max_us'] / 1000:.1f} "
              f"| {s['errors']} | {s['server_cpu_cores']} / {s['wrk_cpu_cores']} / {s['postgres_cpu_cores']} "
              f"/ {s['redis_cpu_cores']} / {s['other_cpu_cores']} | {s['serving_cpu_us_per_request']} |")
    if len(r["rounds"]) > 1:
        print("rounds (governed / floor req/s, ratio): " + "; ".join(
            f"{x['governed']['rps']:,.0f} / {x['floor']['rps']:,.0f}, {x['ratio_rps']:.3f}" for x in r["rounds"]))
        print("the table shows the round with the median ratio")
    t, a = r["targets"], r["audit"]
    print(f"ratio governed/floor: {r['ratio_rps']:.3f} (target >= {TARGET_RATIO}: "
          f"{'met' if t['ratio_ge_0_5'] else 'NOT met'}); governed p99 {g['p99_ms']:.2f} ms "
          f"(target < {TARGET_P99_MS:g} ms: {'met' if t['governed_p99_lt_25ms'] else 'NOT met'})")
    print(f"audit chain valid: {a['valid']}; ledger entries {a['entries']} for {a['governed_calls_counted']} "
          f"governed calls counted")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
