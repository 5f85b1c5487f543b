"""What metrics, the access line and the request id cost per governed dispatch, in-process.

    python bench/observability_cost.py [--requests 20000] [--concurrency 32] [--rounds 5]

Drives the ASGI app exactly as bench/dispatch_breakdown.py does (32 concurrent callers on uvloop, no sockets),
with stdout sent to /dev/null (a real write and flush per access line), and compares, in interleaved rounds:
as served; the access line off (its logger above INFO); and every observability step off (no request id,
no counts, no access line, no dispatch, ledger or pool metrics), which is Prism before it had them.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack, redirect_stdout
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop
from sqlalchemy import event

from bench.dispatch_breakdown import RAISED, drive, parse_args, patched, prepare, scope_for
from prism.app import create_app
from prism.cli.serve import YOUNG_GENERATION_THRESHOLD
from prism.config import Settings
from prism.ledger import writer
from prism.observability import dispatch, pools
from prism.observability.exchange import Exchange
from prism.observability.logs import ACCESS


class _Unobserved:
    def observe(self, _value: float) -> None:
        return None


def _without_observability(app: Any, stack: ExitStack) -> None:
    async def answer(self: Exchange, message: Any) -> None:
        await self.send(message)

    class NoDispatchObservation:
        def __init__(self, call: Any, *, governed: bool) -> None:
            return None

        def __enter__(self) -> None:
            return None

        def __exit__(self, *_: Any) -> None:
            return None

    stack.enter_context(patched(Exchange, "answer", answer))
    stack.enter_context(patched(Exchange, "finish", lambda self: None))
    stack.enter_context(patched(dispatch, "ObservedDispatch", NoDispatchObservation))
    import prism.dispatch.dispatcher as dispatcher_module
    stack.enter_context(patched(dispatcher_module, "ObservedDispatch", NoDispatchObservation))
    stack.enter_context(patched(writer, "LEDGER_BATCH_SIZE", _Unobserved()))
    stack.enter_context(patched(writer, "LEDGER_COMMIT_SECONDS", _Unobserved()))
    db = app.state.db
    for engine in {db.engine, db.read_engine}:
        event.remove(engine.sync_engine, "checkout", pools._checked_out)
        event.remove(engine.sync_engine, "checkin", pools._checked_in)
    stack.callback(pools.observe_pools, db)


def _access_line_off(app: Any, stack: ExitStack) -> None:
    level = ACCESS.level
    ACCESS.setLevel(logging.WARNING)
    stack.callback(ACCESS.setLevel, level)


async def measure(url: str, body: bytes, key: str, args: argparse.Namespace) -> dict[str, list[float]]:
    app = create_app(Settings(database_url=url, log_format="json", **RAISED))
    scope = scope_for(body, key)
    variants: dict[str, Callable[[Any, ExitStack], None]] = {
        "as served (request id, counts, access line)": lambda app, stack: None,
        "access line off": _access_line_off,
        "observability off (before)": _without_observability,
    }
    results: dict[str, list[float]] = {}
    async with app.router.lifespan_context(app):
        for _ in range(args.rounds):
            for name, apply in variants.items():
                with ExitStack() as stack:
                    apply(app, stack)
                    await drive(app, scope, body, min(2000, args.requests), args.concurrency)  # warm caches
                    results.setdefault(name, []).append(
                        (await drive(app, scope, body, args.requests, args.concurrency))["cpu_us"])
    return results


async def main_async(args: argparse.Namespace) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="prism-obs-cost-") as tmp:
        url, body, key = await prepare(Path(tmp))
        return await measure(url, body, key, args)


def main() -> None:
    args = parse_args()
    # The served process's collector tuning (prism.cli.serve): without it, collections dominate the spread.
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *gc.get_threshold()[1:])
    with open(os.devnull, "w") as sink, redirect_stdout(sink):
        rounds = uvloop.run(main_async(args))
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    before = medians["observability off (before)"]
    print(f"\n{args.requests} requests per variant and round, {args.concurrency} concurrent callers, "
          f"median of {args.rounds} rounds, in-process (no sockets), stdout to /dev/null")
    print("| variant | CPU µs/request | vs observability off | rounds |")
    print("|---|---:|---:|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.1f} | {(value - before) / before * 100:+.1f}% | "
              f"{' / '.join(f'{v:.0f}' for v in rounds[name])} |")


if __name__ == "__main__":
    main()
