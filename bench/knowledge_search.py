"""Knowledge search at scale: what an upload costs and what a query costs at ~20,000 chunks.

    python bench/knowledge_search.py [--chunks 20000] [--repeat 5]
    python bench/knowledge_search.py --database-url postgresql://postgres@127.0.0.1:5432/prism_bench_knowledge

Prism's ASGI app is driven in-process (no sockets) with the demo workspace's key, through the governed
`POST /api/mcp/tools/prism_<mega tool>/`, as an agent calls it. The text is synthetic: words drawn from a
Zipf-like vocabulary of 30,000 words (plus the common English function words), in sentences, so that a
query meets terms found in almost every chunk as well as rare ones. Reported, each as the median of
`--repeat` runs:

- upload: a 9,000-word document uploaded and processed (default chunking: 200 words, 40 overlapping);
- queries: `knowledge_query/documents/chunk/search` for a typical question (7 words), a long one (40 words)
  and a rare-term one, then `document/search` and `document/similar`, once the organization holds about
  `--chunks` chunks.

CPU is this process's (time.process_time: the app, and SQLite's own work in its thread); on PostgreSQL the
server's CPU is not in it, so the wall time is given too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench.pgdb import throwaway_database
from prism.app import create_app
from prism.config import Settings
from prism.ledger.keys import LedgerKeys
from prism.migrate import upgrade_async
from prism.seed import seed_demo
from prism.storage import Database

RAISED = {f"rate_limit_{tier}": 10**9 for tier in
          ("anonymous", "authenticated", "admin", "auth_endpoints", "mcp", "key_registration")}
FUNCTION_WORDS = ("the of and to a in is that for it as was with be by on not he this are or his from at which "
                  "but have an they you were her she there been one all we their has would when if so what no "
                  "will can more how should").split()
TYPICAL = "how often should the mechanical seal be replaced"
RARE = "zymurgy quillwort"


def vocabulary(rng: random.Random, size: int = 30_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen[''.join(rng.choice(letters) for _ in range(rng.randint(3, 10)))] = None
    return list(seen)


class Writer:
    """Sentences of Zipf-distributed words: a few very common, most rare."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.words = [*FUNCTION_WORDS, "mechanical", "seal", "replaced", "often", "pump", "casing",
                      *vocabulary(self.rng)]
        self.weights = [1 / (rank + 1) ** 1.05 for rank in range(len(self.words))]

    def text(self, n_words: int) -> str:
        drawn = self.rng.choices(self.words, self.weights, k=n_words)
        sentences, i = [], 0
        while i < len(drawn):
            length = self.rng.randint(8, 20)
            sentences.append(" ".join(drawn[i:i + length]).capitalize() + ".")
            i += length
        return "\n\n".join(" ".join(sentences[j:j + 5]) for j in range(0, len(sentences), 5))


async def timed(work: Callable[[], Awaitable[Any]]) -> tuple[float, float, Any]:
    """(CPU ms, wall ms, result) of one awaited call."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = await work()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000, result


async def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    await upgrade_async(url)
    db = Database(url)
    try:
        async with db.write() as session:
            demo = await seed_demo(session, LedgerKeys(Settings(database_url=url, **RAISED)))
    finally:
        await db.dispose()
    app = create_app(Settings(database_url=url, seed_demo=False, **RAISED))
    writer = Writer()
    results: dict[str, Any] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=600,
                                     headers={"Authorization": f"Bearer {demo.api_key}"}) as client:
            async def call(mega: str, entity: str, operation: str, arguments: dict[str, Any]) -> Any:
                r = await client.post(f"/api/mcp/tools/prism_{mega}/", json={
                    "app": "documents", "entity": entity, "operation": operation, "arguments": arguments})
                body = r.json()
                if r.status_code != 200 or not body.get("success"):
                    raise SystemExit(f"{mega}/{entity}/{operation}: {r.status_code} {json.dumps(body)[:500]}")
                return body["data"]

            upload_text = writer.text(9_000)
            uploads = []
            for i in range(args.repeat + 1):  # the first warms the caches and is left out
                cpu, wall, doc = await timed(lambda i=i: call("document_op", "document", "upload", {
                    "title": f"Upload {i}", "content": upload_text}))
                if i:
                    uploads.append((cpu, wall))
            results["upload_9000_words"] = {"chunks": doc["chunk_count"],
                                            "cpu_ms": statistics.median(u[0] for u in uploads),
                                            "wall_ms": statistics.median(u[1] for u in uploads)}
            similar_to = doc["id"]
            listed = await call("entity_crud", "document", "list", {"page_size": 100})
            held = sum(item["chunk_count"] for item in listed["items"])
            fill_cpu, fill_wall, n = 0.0, 0.0, 0
            while held < args.chunks:  # big documents (about 940 chunks each) up to the corpus size asked
                cpu, wall, doc = await timed(lambda n=n: call("document_op", "document", "upload", {
                    "title": f"Corpus {n}", "content": writer.text(140_000)}))
                held += doc["chunk_count"]
                fill_cpu, fill_wall, n = fill_cpu + cpu, fill_wall + wall, n + 1
            results["corpus"] = {"chunks": held, "documents": n + args.repeat + 1,
                                 "fill_wall_s": round(fill_wall / 1000, 1)}
            long_query = " ".join(writer.text(60).replace(".", "").split()[:40])
            cases = {
                "chunk/search typical (7 words)": ("knowledge_query", "chunk", "search", {"query": TYPICAL}),
                "chunk/search long (40 words)": ("knowledge_query", "chunk", "search", {"query": long_query}),
                "chunk/search rare terms": ("knowledge_query", "chunk", "search", {"query": RARE}),
                "document/search typical": ("knowledge_query", "document", "search", {"query": TYPICAL}),
                "document/similar": ("knowledge_query", "document", "similar", {"id": similar_to}),
            }
            queries: dict[str, Any] = {}
            answers: dict[str, Any] = {}
            for name, (mega, entity, operation, arguments) in cases.items():
                runs = []
                for i in range(args.repeat + 1):
                    cpu, wall, answers[name] = await timed(
                        lambda mega=mega, entity=entity, operation=operation, arguments=arguments: call(
                            mega, entity, operation, arguments))
                    if i:
                        runs.append((cpu, wall))
                queries[name] = {"cpu_ms": statistics.median(r[0] for r in runs),
                                 "wall_ms": statistics.median(r[1] for r in runs)}
            results["queries"] = queries
            results["answers"] = answers
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chunks", type=int, default=20_000, help="chunks the organization holds when queried")
    p.add_argument("--repeat", type=int, default=5, help="runs per measurement (median), after one warm-up")
    p.add_argument("--database-url", default=None, help="a throwaway PostgreSQL database (prism_bench*)")
    p.add_argument("--answers", type=Path, default=None, help="write the query answers here (to compare runs)")
    args = p.parse_args()
    with ExitStack() as stack:
        if args.database_url:
            stack.enter_context(throwaway_database(args.database_url))
            url = args.database_url
        else:
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory(prefix='prism-knowledge-'))}/prism.db"
        results = asyncio.run(run(url, args))
    answers = results.pop("answers")
    if args.answers:
        args.answers.write_text(json.dumps(answers, indent=1, sort_keys=True))
    engine = "PostgreSQL" if args.database_url else "SQLite"
    up = results["upload_9000_words"]
    print(f"\n{engine}; corpus {results['corpus']}; median of {args.repeat} runs")
    print("| measurement | CPU ms | wall ms |")
    print("|---|---:|---:|")
    print(f"| upload + process, 9,000 words ({up['chunks']} chunks) | {up['cpu_ms']:.1f} | {up['wall_ms']:.1f} |")
    for name, q in results["queries"].items():
        print(f"| {name} | {q['cpu_ms']:.1f} | {q['wall_ms']:.1f} |")


if __name__ == "__main__":
    main()
