"""MCP `tools/call` through Prism's door (governed, audit on) vs a FastMCP server, same wrk load, one run.

    python bench/mcp.py [--duration 15] [--connections 32] [--rounds 3]

Prism: `prism serve --workers 1` on a fresh SQLite file, measured once per protocol revision: 2025-03-26,
2025-06-18 and 2025-11-25 open a session with `initialize` and wrk posts `tools/call prism_entity_crud {read
spare_part}` with that Mcp-Session-Id (2025-06-18 on answer structured content too); 2026-07-28 posts the same
call without any session, its envelope in `params._meta` and its routing headers set (authenticated, authorized,
audited, rate-limited with the ceiling raised out of the way). FastMCP: `uvicorn bench.fastmcp_app:app` with the same
Uvicorn settings in its stateless JSON mode, the same JSON-RPC request for an ungoverned tool answering the same
record.
With `--rounds N` every side is measured in turn N times over, and each revision's ratio is the median of the
rounds' ratios (each round's Prism rate over the same round's FastMCP rate): on a shared VM either side's rate can
move by a fifth between runs a minute apart, and a ratio of one round compares the two under the same conditions.
Afterwards the audit chain is verified. Raw wrk reports and a JSON summary go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.dispatch import Plan, measure
from bench.harness import (
    LOOPBACK,
    RESULTS,
    Server,
    bench_env,
    free_port,
    machine,
    prism_cli,
    spawn,
    start_prism,
    write_result,
)
from bench.loadgen import lua_long_string, write_post_script

PRISM_PATH = "/api/mcp/sse"
FASTMCP_PATH = "/mcp"
TARGET_RATIO = 5.0
ACCEPT = "application/json, text/event-stream"
REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
MODERN = "2026-07-28"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=15.0, help="measured seconds per target")
    p.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds per target before measuring")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="wrk threads")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every side in turn this many times; each ratio is the median of the rounds'")
    return p.parse_args()


def rpc(method: str, params: dict[str, Any], request_id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    return message


def open_session(client: httpx.Client, path: str, version: str = "2025-03-26") -> str:
    """initialize + notifications/initialized, as a client does; the Mcp-Session-Id."""
    answer = client.post(path, json=rpc("initialize", {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}))
    answer.raise_for_status()
    session: str = answer.headers.get("mcp-session-id", "")  # none from a stateless server
    client.post(path, json=rpc("notifications/initialized", {}, None),
                headers={"Mcp-Session-Id": session} if session else {}).raise_for_status()
    return session


def tool_call(client: httpx.Client, path: str, session: str, body: bytes,
              extra: dict[str, str] | None = None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", **({"Mcp-Session-Id": session} if session else {}),
               **(extra or {})}
    answer = client.post(path, content=body, headers=headers)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()["result"]
    if result.get("isError"):
        raise RuntimeError(f"tools/call failed on {path}: {result}")
    return result


def script(path: Path, *, url_path: str, body: bytes, bearer: str, session: str,
           extra: dict[str, str] | None = None) -> Path:
    write_post_script(path, url_path=url_path, body=body, bearer=bearer)
    headers = {"Accept": ACCEPT, **({"Mcp-Session-Id": session} if session else {}), **(extra or {})}
    with path.open("a") as out:
        out.write("\n")
        for name, value in headers.items():
            out.write(f'wrk.headers["{name}"] = {lua_long_string(value)}\n')  # names are plain tokens
    return path


def revision_request(version: str, part_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The read call as a client of `version` sends it: its params and the headers beyond the session's."""
    params: dict[str, Any] = {"name": "prism_entity_crud", "arguments": {
        "app": "spare_parts", "entity": "spare_part", "operation": "read", "arguments": {"id": part_id}}}
    if version != MODERN:
        return params, {"MCP-Protocol-Version": version}
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": version,
                       "io.modelcontextprotocol/clientCapabilities": {},
                       "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}
    return params, {"MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": "prism_entity_crud"}


def start_fastmcp(record_file: Path, *, cwd: Path) -> Server:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "bench.fastmcp_app:app", "--host", LOOPBACK, "--port", str(port),
               "--workers", "1", "--loop", "uvloop", "--http", "httptools", "--no-access-log",
               "--no-server-header", "--no-proxy-headers", "--log-level", "warning"]
    env = bench_env(PRISM_BENCH_FASTMCP_RECORD=str(record_file))
    return spawn("fastmcp", command, env=env, cwd=cwd, port=port, log_path=cwd / "fastmcp.log")


def run(workdir: Path, plan: Plan) -> dict[str, Any]:
    database_url = f"sqlite:///{workdir / 'prism.db'}"
    servers: list[Server] = []
    try:
        prism, banner = start_prism(database_url=database_url, cwd=workdir, log_path=workdir / "prism.log",
                                    extra_env={"PRISM_RATE_LIMIT_MCP": "1000000000"})
        servers.append(prism)
        prism.wait_ready()
        key = banner["api_key"]
        headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT}
        with httpx.Client(base_url=prism.base_url, headers=headers) as client:
            session = open_session(client, PRISM_PATH)
            listing = rpc("tools/call", {"name": "prism_entity_crud", "arguments": {
                "app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {"page_size": 1}}})
            listed = tool_call(client, PRISM_PATH, session, json.dumps(listing).encode())
            part_id = json.loads(listed["content"][0]["text"])["data"]["items"][0]["id"]
            prism_scripts = {}
            for version in REVISIONS:
                params, extra = revision_request(version, part_id)
                opened = "" if version == MODERN else open_session(client, PRISM_PATH, version)
                body = json.dumps(rpc("tools/call", params, 2)).encode()
                answered = tool_call(client, PRISM_PATH, opened, body, extra)
                record = json.loads(answered["content"][0]["text"])["data"]
                prism_scripts[version] = script(workdir / f"prism-{version}.lua", url_path=PRISM_PATH, body=body,
                                                bearer=key, session=opened, extra=extra)
        (workdir / "record.json").write_text(json.dumps(record))
        fast = start_fastmcp(workdir / "record.json", cwd=workdir)
        servers.append(fast)
        _wait_port(fast)
        fast_body = json.dumps(rpc("tools/call", {"name": "read_spare_part", "arguments": {"id": part_id}},
                                   2)).encode()
        with httpx.Client(base_url=fast.base_url, headers={"Accept": ACCEPT}) as client:
            fast_session = open_session(client, FASTMCP_PATH)
            tool_call(client, FASTMCP_PATH, fast_session, fast_body)
        fast_script = script(workdir / "fastmcp.lua", url_path=FASTMCP_PATH, body=fast_body, bearer=key,
                             session=fast_session)
        rounds = []
        for _ in range(max(1, plan.rounds)):
            measured = {version: measure(prism, path, plan) for version, path in prism_scripts.items()}
            fast_side = measure(fast, fast_script, plan)
            rounds.append({"prism": measured, "fastmcp": fast_side,
                           "ratio_rps": {v: round(g["rps"] / fast_side["rps"], 2) for v, g in measured.items()}})
    finally:
        for server in servers:
            server.stop()
    audit = prism_cli(["audit", "verify", "--tenant", "demo"], database_url=database_url, cwd=workdir)
    entries = sum(log["tree_size"] + log["waiting"] for log in audit["logs"])
    # + the list and one read per revision made in setup
    calls = sum(g["warmup_requests"] + g["requests"] for r in rounds for g in r["prism"].values())
    counted = calls + 1 + len(REVISIONS)
    # Per revision, the round with the median ratio (the lower middle when even) gives the figures shown.
    governed, ratios = {}, {}
    for version in REVISIONS:
        middle = sorted(rounds, key=lambda r: r["ratio_rps"][version])[(len(rounds) - 1) // 2]
        governed[version], ratios[version] = middle["prism"][version], middle["ratio_rps"][version]
    fastmcp = sorted((r["fastmcp"] for r in rounds), key=lambda f: f["rps"])[(len(rounds) - 1) // 2]
    return {
        "prism": governed, "fastmcp": fastmcp, "ratio_rps": ratios, "rounds": rounds,
        "targets": {"ratio_ge_5": {version: ratio >= TARGET_RATIO for version, ratio in ratios.items()}},
        "audit": {"valid": audit["valid"], "entries": entries, "governed_calls_counted": counted,
                  "all_calls_audited": audit["valid"] and entries >= counted},
    }


def _wait_port(server: Server) -> None:
    # FastMCP serves only its MCP path; any HTTP answer on it means the server is up.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(server.base_url + FASTMCP_PATH, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise TimeoutError("fastmcp did not start")


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required: apt-get install -y wrk")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw_log = RESULTS / f"mcp-{stamp}.wrk.txt"
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prism-bench-mcp-")))
        plan = Plan(args.connections, args.threads, args.duration, args.warmup, None, None, None, raw_log,
                    args.rounds)
        outcome = run(workdir, plan)
    report: dict[str, Any] = {
        "benchmark": "mcp", "backend": "sqlite", "started_at": stamp, "machine": machine(),
        "settings": {"duration_s": args.duration, "warmup_s": args.warmup, "rounds": args.rounds,
                     "connections": args.connections,
                     "threads": args.threads, "uvicorn": "1 worker, uvloop, httptools, access log off"},
        **outcome, "raw_wrk_log": str(raw_log.relative_to(RESULTS.parent.parent)),
    }
    path = write_result(f"mcp-{stamp}", report)
    print(f"\nMCP tools/call, {args.connections} connections, {args.duration:g} s measured")
    print("| side | req/s | p50 ms | p99 ms | errors | CPU cores: server / wrk / other | ratio to fastmcp |")
    print("|---|---:|---:|---:|---:|---|---:|")
    sides = [*((f"prism {v}", report["prism"][v], report["ratio_rps"][v]) for v in REVISIONS),
             ("fastmcp", report["fastmcp"], 1.0)]
    for name, s, ratio in sides:
        print(f"| {name} | {s['rps']:,.0f} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} | {s['errors']} "
              f"| {s['server_cpu_cores']} / {s['wrk_cpu_cores']} / {s['other_cpu_cores']} | {ratio:.2f} |")
    if len(report["rounds"]) > 1:
        print("rounds (ratio per revision; FastMCP req/s): " + "; ".join(
            ", ".join(f"{r['ratio_rps'][v]:.2f}" for v in REVISIONS) + f" ({r['fastmcp']['rps']:,.0f})"
            for r in report["rounds"]))
        print("each Prism row is its revision's median round; the FastMCP row is the median FastMCP round")
    a = report["audit"]
    met = report["targets"]["ratio_ge_5"]
    print(f"target prism >= {TARGET_RATIO:g}x fastmcp per revision: "
          f"{', '.join(f'{v} ' + ('met' if ok else 'NOT met') for v, ok in met.items())}; audit chain valid: "
          f"{a['valid']}, {a['entries']} entries for {a['governed_calls_counted']} governed calls counted")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
