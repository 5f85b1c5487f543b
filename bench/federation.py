"""Federation overhead: a governed call to an upstream MCP server through Prism vs calling it directly.

    python -m bench.federation [--calls 300]   (as a module: bench/mcp.py would shadow the mcp package)

One run: a FastMCP server (bench/federation_upstream.py) over HTTPS on loopback; `prism serve` on a fresh SQLite
file with that server added (`prism integration add-mcp`) and the demo organization connected to it. Both sides
are measured with the official `mcp` client over one session each, sequential calls: directly to FastMCP's
`lookup_part`, and through Prism's MCP door as `prism_integration_call` → integration_call/upstream/tool/lookupPart
(authenticated, authorized, audited, then forwarded). Reports p50/p90 latency, calls/s, and the targets
(≤ 2 ms added at p50, ≥ 0.5 of the direct calls/s).

`--sessions N` runs N client sessions at once (each one call after another, `--calls` in all), as N agents
would: calls/s is then the throughput of the whole setup on this machine's cores, where one session's is the
inverse of its latency. `--keyed` gives each governed call an idempotency key of its own; `--database-url
postgresql://…/prism_bench_federation` runs Prism on a PostgreSQL database the benchmark creates and drops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.webhooks_receiver import make_tls

from bench.harness import (
    LOOPBACK,
    bench_env,
    free_port,
    machine,
    percentile,
    spawn,
    start_prism,
    tree_cpu_seconds,
    write_result,
)
from bench.pgdb import throwaway_database

ADDED_P50_MS, THROUGHPUT_RATIO = 2.0, 0.5


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--sessions", type=int, default=1, help="client sessions calling at once (default 1)")
    p.add_argument("--keyed", action="store_true",
                   help="each governed call carries an idempotency key of its own (_meta.idempotencyKey)")
    p.add_argument("--database-url", default=None,
                   help="Prism on PostgreSQL: a database prism_bench* it creates and drops (default: SQLite)")
    return p.parse_args()


async def measure(url: str, headers: dict[str, str], verify: Any, tool: str, arguments: dict[str, Any],
                  calls: int, processes: dict[str, int], sessions: int = 1, keyed: bool = False) -> dict[str, Any]:
    """`calls` calls over `sessions` sessions at once, each sequential; with the CPU each of `processes`
    (name: pid) spent per call."""
    latencies: list[float] = []
    warm = asyncio.Barrier(sessions + 1)  # every session warmed up, then all start together

    async def one_session(share: int) -> None:
        try:
            async with httpx2.AsyncClient(headers=headers, timeout=30, verify=verify) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                    for _ in range(20):  # warm-up: connections, caches, the registry's first views
                        await client.call_tool(tool, arguments)
                    await warm.wait()
                    for _ in range(share):
                        meta = {"idempotencyKey": str(uuid.uuid4())} if keyed else None
                        start = time.perf_counter()
                        result = await client.call_tool(tool, arguments, meta=meta)
                        latencies.append((time.perf_counter() - start) * 1000)
                        assert not result.is_error, result
        except BaseException:
            await warm.abort()  # nobody waits any more for a session that failed before the start
            raise

    shares = [calls // sessions + (1 if i < calls % sessions else 0) for i in range(sessions)]
    running = [asyncio.create_task(one_session(share)) for share in shares]
    try:
        await warm.wait()  # the sessions go on as soon as this task next yields: after the readings below
    except asyncio.BrokenBarrierError:
        await asyncio.gather(*running)  # raises the failed session's own error
        raise
    cpu_before = {name: tree_cpu_seconds(pid) for name, pid in processes.items()}
    began = time.perf_counter()
    await asyncio.gather(*running)
    elapsed = time.perf_counter() - began
    cpu_ms = {f"{name}_cpu_ms_per_call": round((tree_cpu_seconds(pid) - cpu_before[name]) * 1000 / calls, 3)
              for name, pid in processes.items()}
    latencies.sort()
    return {"calls": calls, "sessions": sessions, "p50_ms": round(percentile(latencies, 50), 3),
            "p90_ms": round(percentile(latencies, 90), 3), "p99_ms": round(percentile(latencies, 99), 3),
            "calls_per_s": round(calls / elapsed, 1), **cpu_ms}


def main() -> None:
    args = parse_args()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report: dict[str, Any] = {"benchmark": "federation", "started_at": stamp, "machine": machine(),
                              "settings": {"calls": args.calls, "sessions": args.sessions, "keyed": args.keyed,
                                           "backend": "postgresql" if args.database_url else "sqlite"}}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prism-federation-")))
        if args.database_url:
            stack.enter_context(throwaway_database(args.database_url))
        tls = make_tls(workdir)
        port = free_port()
        upstream = spawn("fastmcp", [sys.executable, "-m", "uvicorn", "bench.federation_upstream:app", "--host",
                                     LOOPBACK, "--port", str(port), "--ssl-certfile", str(tls.cert),
                                     "--ssl-keyfile", str(tls.key), "--log-level", "warning"],
                         env=bench_env(), cwd=Path(__file__).resolve().parent.parent, port=port,
                         log_path=workdir / "fastmcp.log")
        upstream_url = f"https://{LOOPBACK}:{port}/mcp"
        outbound = {"PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "PRISM_WEBHOOK_CA_BUNDLE": str(tls.ca)}
        url = args.database_url or f"sqlite:///{workdir / 'prism.db'}"
        prism, banner = start_prism(database_url=url, cwd=workdir, log_path=workdir / "prism.log", extra_env=outbound)
        try:
            _wait_listening(port)
            prism.wait_ready(timeout=120)
            env = {**bench_env(PRISM_DATABASE_URL=url, **outbound)}
            added = _cli(["integration", "add-mcp", upstream_url, "--app", "upstream"], env, workdir)
            connected = _cli(["integration", "connect", "upstream", "--tenant", banner["tenant"], "--base-url",
                              upstream_url], env, workdir)
            report["added"] = {"handlers": added.get("handlers"), "connected": connected.get("base_url")}
            time.sleep(3)  # the server picks the change up within PRISM_INTEGRATIONS_REFRESH_SECONDS
            verify = str(tls.ca)
            processes = {"prism": prism.pid, "upstream": upstream.pid}
            report["direct"] = asyncio.run(measure(upstream_url, {}, verify, "lookup_part", {"sku": "P-1"},
                                                   args.calls, processes, args.sessions))
            report["governed"] = asyncio.run(measure(
                prism.base_url + "/api/mcp/sse", {"Authorization": f"Bearer {banner['api_key']}"}, True,
                "prism_integration_call", {"app": "upstream", "entity": "tool", "operation": "lookupPart",
                                           "arguments": {"sku": "P-1"}}, args.calls, processes, args.sessions,
                args.keyed))
            # Prism's own share: a governed call of a built-in read handler through the same door, same session kind.
            report["governed_builtin_read"] = asyncio.run(measure(
                prism.base_url + "/api/mcp/sse", {"Authorization": f"Bearer {banner['api_key']}"}, True,
                "prism_entity_crud", {"app": "spare_parts", "entity": "spare_part", "operation": "list",
                                      "arguments": {"page_size": 1}}, args.calls, processes, args.sessions))
        finally:
            prism.stop()
            upstream.stop()
    direct, governed = report["direct"], report["governed"]
    report["added_p50_ms"] = round(governed["p50_ms"] - direct["p50_ms"], 3)
    report["throughput_ratio"] = round(governed["calls_per_s"] / direct["calls_per_s"], 3)
    report["targets"] = {"added_p50_le_2ms": report["added_p50_ms"] <= ADDED_P50_MS,
                         "throughput_ge_half": report["throughput_ratio"] >= THROUGHPUT_RATIO}
    path = write_result(f"federation-{stamp}", report)
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=1))
    print(f"results: {path}")


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    import subprocess

    from bench.harness import PRISM

    done = subprocess.run([PRISM, *args, "--json"], env=env, cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"prism {' '.join(args)}: {done.stderr.decode()[:500]}")
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _wait_listening(port: int, timeout: float = 60.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the upstream never listened")


if __name__ == "__main__":
    main()
