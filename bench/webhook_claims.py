"""What one delivery worker's claim costs PostgreSQL as organizations with a webhook grow.

    python bench/webhook_claims.py [--counts 1000,10000] [--history 20] [--repeat 30] \
        [--database-url postgresql://postgres@127.0.0.1:5432/prism_bench_claims]

A throwaway PostgreSQL database is created (migrated as Prism's) and dropped. Organizations are added in steps up
to each of `--counts`, each with a webhook and `--history` final deliveries (tests/webhooks_claim_load.py). Five
more organizations have deliveries: three with 10 due each, one with 10 due and 4 leased to a worker, one with a
retry due in an hour. Each case is claimed `--repeat` times (a claim of 16, the worker's default, on the
database's clock), each in a transaction rolled back, so every claim sees the same queue:

- due: as seeded (16 deliveries taken);
- idle: nothing due (the pending deliveries made final first, in the same transaction), what every poll of an
  idle worker costs;
- backlog: one more organization with 100,000 due.

Reported per case: the median wall time of the claim statement (one round trip, from this process), and from one
EXPLAIN (ANALYZE, BUFFERS): the database's execution time, the shared buffers touched, and how many organizations
were probed for their oldest due deliveries (the loops of the per-organization index scan).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.webhooks_claim_load import buffers, explain_claim, organizations_probed, seed  # noqa: E402

from bench.harness import machine  # noqa: E402
from bench.pgdb import throwaway_database  # noqa: E402
from prism.migrate import upgrade  # noqa: E402
from prism.storage import normalize_url  # noqa: E402
from prism.webhooks import postgres_queue  # noqa: E402

LIMIT = 16


async def prepare(connection: AsyncConnection, case: str) -> None:
    if case == "idle":
        await connection.execute(text("UPDATE webhook_deliveries SET due_at = NULL WHERE due_at IS NOT NULL"))


async def measure(engine: Any, case: str, repeat: int) -> dict[str, Any]:
    walls = []
    taken = 0
    for _ in range(repeat):
        async with engine.connect() as connection:
            await connection.begin()
            await prepare(connection, case)
            started = time.perf_counter()
            rows = await postgres_queue.claim(connection, me="bench", now=None, lease=30, margin=5, limit=LIMIT)
            walls.append(time.perf_counter() - started)
            taken = len(rows)
            await connection.rollback()
    async with engine.connect() as connection:
        await connection.begin()
        await prepare(connection, case)
        plan = await explain_claim(connection, limit=LIMIT)
        await connection.rollback()
    return {"case": case, "taken": taken, "wall_ms": round(statistics.median(walls) * 1000, 2),
            "execution_ms": round(plan["Execution Time"], 2), "buffers": buffers(plan),
            "probed": organizations_probed(plan)}


async def run(url: str, counts: list[int], history: int, repeat: int) -> list[dict[str, Any]]:
    engine = create_async_engine(normalize_url(url))
    results = []
    try:
        async with engine.begin() as connection:
            await seed(connection, count=5, history=history, due={1: 10, 2: 10, 3: 10, 4: 10}, leased={4: 4},
                       later={5: 1})
        seeded = 5
        for count in counts:
            async with engine.begin() as connection:
                await seed(connection, count=count - seeded, history=history)
            seeded = count
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(text("VACUUM ANALYZE"))
            for case in ("due", "idle"):
                results.append({"organizations": count, **await measure(engine, case, repeat)})
                print(results[-1], flush=True)
        async with engine.begin() as connection:
            await seed(connection, count=1, history=0, due={1: 100_000})
        async with engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text("VACUUM ANALYZE"))
        results.append({"organizations": seeded + 1, **await measure(engine, "backlog", repeat)})
        print(results[-1], flush=True)
    finally:
        await engine.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="1000,10000")
    parser.add_argument("--history", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--database-url",
                        default=f"postgresql://postgres@127.0.0.1:5432/prism_bench_claims_{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    print(machine())
    with throwaway_database(args.database_url):
        upgrade(args.database_url)
        results = asyncio.run(run(args.database_url, [int(c) for c in args.counts.split(",")], args.history,
                                  args.repeat))
    print("| organizations with a webhook | case | taken | wall (median) | execution | buffers "
          "| organizations probed |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['organizations']:,} | {r['case']} | {r['taken']} | {r['wall_ms']} ms | {r['execution_ms']} ms "
              f"| {r['buffers']:,} | {r['probed']:,} |")


if __name__ == "__main__":
    main()
