"""Webhook delivery throughput: `prism worker` processes vs a plain httpx loop, same bodies, same receiver.

    python bench/webhooks.py [--events 3000] [--concurrency 16] \
        [--database-url postgresql://postgres@127.0.0.1:5432/prism_bench_webhooks]

A throwaway PostgreSQL database is created and dropped. The receiver is uvicorn serving
`bench/webhook_receiver.py` over HTTPS (a CA made here, trusted by both sides) in its own process.
1. Raw loop: one process, httpx, `--concurrency` requests in flight, POSTs the recorded event bodies.
2. 1 worker, then 2 workers (`prism worker` processes, started and idle first): the events are recorded
   in one transaction; the clock starts at its commit (when the deliveries become visible) and stops at
   the `delivered_at` of the last delivery, once every delivery is SUCCESS in the database — signed,
   sent, and recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.factories import Factory  # noqa: E402
from tests.webhooks_receiver import make_tls  # noqa: E402

from bench.harness import (  # noqa: E402
    PRISM,
    bench_env,
    free_port,
    machine,
    postgres_cpu_seconds,
    proc_cpu_seconds,
    system_busy_seconds,
    write_result,
)
from bench.pgdb import throwaway_database  # noqa: E402
from prism.config import Settings  # noqa: E402
from prism.events.outbox import emit  # noqa: E402
from prism.kit.timeutil import utcnow  # noqa: E402
from prism.migrate import upgrade  # noqa: E402
from prism.models import OutboxEvent  # noqa: E402
from prism.storage import Database  # noqa: E402
from prism.webhooks.models import WebhookDelivery  # noqa: E402
from prism.webhooks.schemas import WebhookCreate  # noqa: E402
from prism.webhooks.service import check_receiver_url, create_webhook  # noqa: E402

DATA = {"decision_id": "d", "decision": "ALLOW", "decision_type": "agent_action", "primary_reason": "none",
        "ai_system": {"id": "bench", "name": "bench"}, "policies_evaluated": 3, "policies_violated": 0,
        "latency_ms": 2, "trace_id": "t"}


async def record_events(db: Database, ws: Any, count: int) -> None:
    async with db.write() as s:
        for _ in range(count):
            await emit(s, organization_id=ws.org.id, tenant_id=ws.tenant.id,
                       event_type="governance.decision.allow", data=DATA)


async def successes(db: Database, webhook_id: str) -> int:
    async with db.read() as s:
        return int((await s.execute(select(func.count()).select_from(WebhookDelivery).where(
            WebhookDelivery.webhook_id == webhook_id, WebhookDelivery.status == "success"))).scalar_one())


async def last_delivered(db: Database, webhook_id: str) -> Any:
    async with db.read() as s:
        return (await s.execute(select(func.max(WebhookDelivery.delivered_at)).where(
            WebhookDelivery.webhook_id == webhook_id))).scalar_one()


async def raw_loop(url: str, bodies: list[bytes], ca: str, concurrency: int) -> float:
    import ssl

    context = ssl.create_default_context(cafile=ca)
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(verify=context, limits=limits) as client:
        queue = list(bodies)

        async def lane() -> None:
            while queue:
                body = queue.pop()
                response = await client.post(url, content=body, headers={"Content-Type": "application/json"})
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrency)))
        return len(bodies) / (time.perf_counter() - started)


class CpuMeter:
    """Cores used during one measured window: receiver, workers (or this process for the raw loop), the PostgreSQL
    server (harness.postgres_cpu_seconds), everything else on the machine, and the machine in all (`host`: near its
    core count, the measure was bound by the machine's CPU, not by Prism's waits)."""

    def __init__(self, receiver: int, workers: list[int]) -> None:
        self.receiver, self.workers = receiver, workers
        self.start = self._sample()

    def _sample(self) -> dict[str, float]:
        return {"wall": time.perf_counter(), "receiver": proc_cpu_seconds(self.receiver),
                "workers": sum(proc_cpu_seconds(p) for p in self.workers) if self.workers else time.process_time(),
                "database": postgres_cpu_seconds(), "all": system_busy_seconds()}

    def read(self) -> dict[str, float]:
        end = self._sample()
        wall = end["wall"] - self.start["wall"]
        used = {k: (end[k] - self.start[k]) / wall for k in ("receiver", "workers", "database", "all")}
        used["host"] = used.pop("all")
        used["other"] = used["host"] - used["receiver"] - used["workers"] - used["database"]
        return {k: round(v, 2) for k, v in used.items()}


def start_receiver(tls: Any, port: int, delay_ms: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bench.webhook_receiver:app", "--port", str(port), "--log-level",
         "warning", "--no-access-log", "--ssl-certfile", str(tls.cert), "--ssl-keyfile", str(tls.key),
         "--loop", "uvloop", "--http", "httptools"], env=bench_env(PRISM_BENCH_RECEIVER_DELAY_MS=str(delay_ms)),
        cwd=REPO)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="prism-bench-webhooks-"))
    tls = make_tls(work)
    db = Database(args.database_url)
    results: dict[str, Any] = {}
    try:
        for delay_ms in args.receiver_delays_ms:
            results[f"receiver_{delay_ms}ms"] = await scenario(args, db, work, tls, delay_ms)
    finally:
        await db.dispose()
    return results


async def scenario(args: argparse.Namespace, db: Database, work: Path, tls: Any, delay_ms: int) -> dict[str, Any]:
    """Raw loop, 1 worker, 2 workers against one receiver answering after `delay_ms`; its own organization."""
    port = free_port()
    receiver = start_receiver(tls, port, delay_ms)
    url = f"https://127.0.0.1:{port}/hook"
    settings = Settings(database_url=args.database_url, seed_demo=False,
                        secret_key_file=str(work / "secret.key"), webhook_allow_private_networks=True,
                        webhook_ca_bundle=str(tls.ca), webhook_worker_in_process=False)
    results: dict[str, Any] = {}
    workers: list[subprocess.Popen[bytes]] = []
    try:
        await asyncio.sleep(1.5)
        ws = await Factory(db).workspace(roles=("owner",))
        # The raw loop posts the very bodies Prism records: recorded before the webhook exists (no deliveries).
        await record_events(db, ws, args.events)
        async with db.read() as s:
            bodies = [p.encode() for p in (await s.execute(select(OutboxEvent.payload).where(
                OutboxEvent.organization_id == ws.org.id).limit(args.events))).scalars()]
        auth = await _owner_context(db, ws)
        async with db.write() as s:
            hook = await create_webhook(s, auth, settings, WebhookCreate(name="bench", url=url),
                                        await check_receiver_url(settings, url))
        await raw_loop(url, bodies[:200], str(tls.ca), args.concurrency)  # warm-up
        meter = CpuMeter(receiver.pid, [])
        results["raw_loop"] = await raw_loop(url, bodies, str(tls.ca), args.concurrency)
        results["cpu_raw_loop"] = meter.read()
        env = bench_env(PRISM_DATABASE_URL=args.database_url, PRISM_SECRET_KEY_FILE=str(work / "secret.key"),
                        PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", PRISM_WEBHOOK_CA_BUNDLE=str(tls.ca),
                        PRISM_WEBHOOK_WORKER_CONCURRENCY=str(args.concurrency), PRISM_LOG_LEVEL="warning",
                        PRISM_WEBHOOK_POLL_SECONDS="0.05")
        for count in (1, 2):
            while len(workers) < count:
                workers.append(subprocess.Popen([PRISM, "worker"], env=env, cwd=work,  # noqa: ASYNC220
                                                stdout=subprocess.DEVNULL))
            await asyncio.sleep(3)  # started and idle
            before = await successes(db, hook["id"])
            await record_events(db, ws, args.events)  # the deliveries become visible at this commit
            committed = utcnow()
            meter = CpuMeter(receiver.pid, [w.pid for w in workers])
            while await successes(db, hook["id"]) < before + args.events:  # noqa: ASYNC110 -- polling the database is the measurement
                await asyncio.sleep(0.2)
            results[f"cpu_workers_{count}"] = meter.read()
            # The clock stops at the last delivery's recorded time, not at the poll that saw it.
            finished = await last_delivered(db, hook["id"])
            results[f"workers_{count}"] = args.events / (finished - committed).total_seconds()
    finally:
        for process in [*workers, receiver]:
            process.terminate()
            process.wait(timeout=10)
    return results


async def _owner_context(db: Database, ws: Any) -> Any:
    from prism.auth.authenticator import Authenticator
    from prism.tenancy.hosts import HostInfo

    authenticator = Authenticator(db, cache_seconds=0)
    return await authenticator.authenticate(f"Bearer {ws.keys['owner']}", HostInfo("platform", "127.0.0.1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--receiver-delays-ms", type=lambda v: [int(x) for x in v.split(",")], default=[0, 50],
                        help="one scenario per delay: 0 = answers at once; 50 = a receiver across a network")
    parser.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432/prism_bench_webhooks")
    args = parser.parse_args()
    with throwaway_database(args.database_url):
        upgrade(args.database_url)
        results = asyncio.run(run(args))
    summary = {"scenarios": results, "events": args.events, "concurrency": args.concurrency, "machine": machine()}
    print("| receiver | plain httpx loop | 1 worker | 2 workers | 1 worker / raw | 2 workers / 1 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        one, two, raw = r["workers_1"], r["workers_2"], r["raw_loop"]
        r.update(one_worker_vs_raw=one / raw, two_vs_one=two / one)
        print(f"| {name} | {raw:,.0f} | {one:,.0f} | {two:,.0f} | {one / raw:.2f} | {two / one:.2f} |")
    for name, r in results.items():
        for side in ("raw_loop", "workers_1", "workers_2"):
            print(f"CPU cores, {name}, {side} (sender = this process for the raw loop): {r['cpu_' + side]}")
    print(f"host: {summary['machine']['nproc']} cores; targets: 1 worker / raw >= 0.5; 2 workers / 1 >= 1.6")
    print(f"results: {write_result('webhooks', summary)}")


if __name__ == "__main__":
    main()
