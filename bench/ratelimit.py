"""Cost of the limit work of one request, memory and Redis (docs/limits.md quotes these numbers).

    python bench/ratelimit.py [--redis-url redis://127.0.0.1:6379/15] [--rounds 200000]

Prints a Markdown table of µs per request, best of five batches (other work on the machine only ever adds
time): an authenticated request (the lockout checked and the user's window counted in one step, as the edge
does it) and a request whose credential failed (the failure counted against the lockout, then the address's
anonymous window). Redis is skipped when it cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

from prism.ratelimit import TIERS, LimiterUnavailable, RateLimiter
from prism.ratelimit.limiter import Backend, Lockout
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.redis_backend import RedisBackend

ADDRESS = "198.51.100.7"


async def best_of(make_call: Callable[[int], Awaitable[object]], rounds: int) -> float:
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(rounds):
            await make_call(i)
        batches.append((time.perf_counter() - start) / rounds * 1e6)
    return min(batches)


async def measure(name: str, backend: Backend, rounds: int) -> tuple[str, float, float]:
    # The lockout never trips here: the failures would otherwise turn every later request into a refusal.
    limiter = RateLimiter(dict.fromkeys(TIERS, 10**12), backend, lockout=Lockout(failures=10**12))
    users = [uuid.uuid4().hex for _ in range(100)]

    async def failed(i: int) -> None:
        await limiter.auth_failed(ADDRESS)
        await limiter.hit("anonymous", ADDRESS)

    try:
        authenticated = await best_of(lambda i: limiter.hit("authenticated", users[i % 100], ADDRESS), rounds)
        refused = await best_of(failed, rounds)
    finally:
        await limiter.close()
    return name, authenticated, refused


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--rounds", type=int, default=200_000)
    args = parser.parse_args()
    rows = [await measure("memory", MemoryBackend(), args.rounds)]
    redis_backend = RedisBackend(args.redis_url)
    try:
        await redis_backend.blocked_for(ADDRESS)
    except LimiterUnavailable:
        await redis_backend.close()
        print(f"(Redis at {args.redis_url} unreachable: skipped)")
    else:
        rows.append(await measure("redis", redis_backend, max(1, args.rounds // 50)))
    print("| storage | authenticated request (µs) | failed credential (µs) |\n|---|---|---|")
    for name, authenticated, refused in rows:
        print(f"| {name} | {authenticated:.2f} | {refused:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
