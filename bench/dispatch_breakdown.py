"""What each stage of a governed dispatch costs: the ASGI app driven in-process, stage by stage.

    python bench/dispatch_breakdown.py [--requests 20000] [--concurrency 32] [--rounds 5]

No sockets and no Uvicorn: 32 concurrent callers on uvloop send the dispatch benchmark's request
straight into Prism's ASGI app, and the CPU time per request is measured. Each variant swaps one
stage for a stand-in, so its difference from `as served` is what that stage costs. Rounds interleave
the variants
and the median is reported. Sampling profilers on this VM over-weight system calls; this measures
instead. Garbage-collection effects need real connections and are measured with the server (see
bench/README.md). The floor app is driven the same way for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop
from sqlalchemy import select

from bench.harness import machine, write_result
from prism.app import create_app
from prism.apps.spare_parts.models import SparePart
from prism.config import Settings
from prism.ledger.keys import LedgerKeys
from prism.migrate import upgrade_async
from prism.seed import seed_demo
from prism.storage import Database
from prism.tenancy.hosts import classify_host

TOOL_PATH = "/api/mcp/tools/prism_entity_crud/"
# The rate limiter keeps running, with ceilings no benchmark reaches.
RAISED = {f"rate_limit_{tier}": 10**9 for tier in
          ("anonymous", "authenticated", "admin", "auth_endpoints", "mcp", "key_registration")}
App = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=20_000, help="requests per variant")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5, help="interleaved repetitions; the median is reported")
    return p.parse_args()


def scope_for(body: bytes, key: str) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1:8000"), (b"authorization", f"Bearer {key}".encode()),
               (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": TOOL_PATH, "raw_path": TOOL_PATH.encode(), "query_string": b"", "root_path": "",
            "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}


async def drive(app: App, scope: dict[str, Any], body: bytes, requests: int, concurrency: int) -> dict[str, float]:
    """CPU and wall microseconds per request; fails loudly on any non-200 answer."""
    remaining = requests

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def caller() -> None:
        nonlocal remaining
        status: list[int] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        while remaining > 0:
            remaining -= 1
            await app(dict(scope), receive, send)
            if status.pop() != 200:
                raise RuntimeError("a governed call failed during the breakdown")

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_us": round(cpu / requests * 1e6, 1), "wall_us": round(wall / requests * 1e6, 1)}


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, original)


async def prepare(workdir: Path) -> tuple[str, bytes, str]:
    """A migrated SQLite file with the demo workspace; (database url, request body, API key)."""
    url = f"sqlite:///{workdir / 'prism.db'}"
    await upgrade_async(url)
    db = Database(url)
    try:
        async with db.write() as session:
            demo = await seed_demo(session, LedgerKeys(Settings(database_url=url, **RAISED)))
        async with db.read() as session:
            part_id = (await session.execute(select(SparePart.id).limit(1))).scalar_one()
    finally:
        await db.dispose()
    body = json.dumps({"app": "spare_parts", "entity": "spare_part", "operation": "read",
                       "arguments": {"id": part_id}}).encode()
    return url, body, demo.api_key


async def measure_prism(url: str, body: bytes, key: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """CPU µs per request of every variant, one value per round; rounds interleave the variants."""
    app = create_app(Settings(database_url=url, **RAISED))
    scope = scope_for(body, key)
    results: dict[str, list[float]] = {}
    async with app.router.lifespan_context(app):
        dispatcher = app.state.dispatcher
        auth_context = await app.state.authenticator.authenticate(
            f"Bearer {key}", classify_host("127.0.0.1:8000", app.state.settings.base_domain))
        handler = dispatcher.registry.get_path("entity_crud/spare_parts/spare_part/read")
        record = (await _first_answer(app, scope, body))["data"]
        variants: dict[str, Callable[[ExitStack], object]] = {
            "as served": lambda stack: None,
            "authentication skipped (context handed over)":
                lambda stack: stack.enter_context(patched(app.state.authenticator, "authenticate",
                                                          _returning(auth_context))),
            "handler answers from memory (no database read)":
                lambda stack: stack.enter_context(patched(handler, "func", _returning(record))),
        }
        for _ in range(args.rounds):
            for name, apply in variants.items():
                with ExitStack() as stack:
                    apply(stack)
                    await drive(app, scope, body, min(2000, args.requests), args.concurrency)  # warm caches
                    results.setdefault(name, []).append(
                        (await drive(app, scope, body, args.requests, args.concurrency))["cpu_us"])
    return results


def _returning(value: Any) -> Callable[..., Awaitable[Any]]:
    async def stand_in(*_args: Any, **_kwargs: Any) -> Any:
        return value

    return stand_in


async def _first_answer(app: App, scope: dict[str, Any], body: bytes) -> dict[str, Any]:
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        chunks.append(message.get("body", b""))

    await app(dict(scope), receive, send)
    answer: dict[str, Any] = json.loads(b"".join(chunks))
    return answer


async def measure_floor(body_file: Path, body: bytes, key: str, args: argparse.Namespace) -> list[float]:
    os.environ["PRISM_BENCH_FLOOR_BODY"] = str(body_file)
    from bench.floor_app import app  # reads its body file at import

    scope = scope_for(body, key)
    await drive(app, scope, body, min(2000, args.requests), args.concurrency)
    return [(await drive(app, scope, body, args.requests, args.concurrency))["cpu_us"] for _ in range(args.rounds)]


async def main_async(args: argparse.Namespace) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="prism-breakdown-") as tmp:
        url, body, key = await prepare(Path(tmp))
        variants = await measure_prism(url, body, key, args)
        (Path(tmp) / "body.json").write_bytes(b'{"success":true}')
        variants["floor app (bare Starlette)"] = await measure_floor(Path(tmp) / "body.json", body, key, args)
    return variants


def main() -> None:
    args = parse_args()
    rounds = uvloop.run(main_async(args))
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    base = medians["as served"]
    print(f"\n{args.requests} requests per variant and round, {args.concurrency} concurrent callers, "
          f"median of {args.rounds} rounds, in-process (no sockets)")
    print("| variant | CPU µs/request | difference vs as served | rounds |")
    print("|---|---:|---:|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.1f} | {value - base:+.1f} | {' / '.join(f'{v:.0f}' for v in rounds[name])} |")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = write_result(f"dispatch-breakdown-{stamp}", {
        "benchmark": "dispatch_breakdown", "started_at": stamp, "machine": machine(),
        "settings": {"requests": args.requests, "concurrency": args.concurrency, "rounds": args.rounds},
        "cpu_us_per_request": {"median": medians, "rounds": rounds}})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
