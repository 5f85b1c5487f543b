"""Cost of one rate-limit check, memory and Redis (docs/limits.md quotes these numbers).

    python bench/ratelimit.py [--redis-url redis://127.0.0.1:6379/15] [--rounds 200000]

Prints a Markdown table: µs per `hit` and per `locked_out`, best of five batches (other work on the machine
only ever adds time). Redis is skipped when it cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from redis.exceptions import RedisError

from prism.ratelimit import TIERS, RateLimiter
from prism.ratelimit.limiter import Backend
from prism.ratelimit.memory import MemoryBackend
from prism.ratelimit.redis_backend import RedisBackend


async def best_of(make_call: object, rounds: int) -> float:
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(rounds):
            await make_call(i)  # type: ignore[operator]
        batches.append((time.perf_counter() - start) / rounds * 1e6)
    return min(batches)


async def measure(name: str, backend: Backend, rounds: int) -> tuple[str, float, float]:
    limiter = RateLimiter(dict.fromkeys(TIERS, 10**12), backend)
    users = [uuid.uuid4().hex for _ in range(100)]
    try:
        hit = await best_of(lambda i: limiter.hit("authenticated", users[i % 100]), rounds)
        locked = await best_of(lambda i: limiter.locked_out(users[i % 100]), rounds)
    finally:
        await limiter.close()
    return name, hit, locked


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--rounds", type=int, default=200_000)
    args = parser.parse_args()
    rows = [await measure("memory", MemoryBackend(), args.rounds)]
    redis_backend = RedisBackend(args.redis_url)
    try:
        await redis_backend.redis.ping()
    except RedisError:
        await redis_backend.close()
        print(f"(Redis at {args.redis_url} unreachable: skipped)")
    else:
        rows.append(await measure("redis", redis_backend, max(1, args.rounds // 50)))
    print("| storage | hit (µs) | locked_out (µs) |\n|---|---|---|")
    for name, hit, locked in rows:
        print(f"| {name} | {hit:.2f} | {locked:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
