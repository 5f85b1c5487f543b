"""The benchmark's webhook receiver: answers every POST with 200 (raw ASGI, nothing else to cost).

PRISM_BENCH_RECEIVER_DELAY_MS (default 0) makes it answer after that many milliseconds, as a receiver
across a network does; the wait costs no CPU.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

DELAY = int(os.environ.get("PRISM_BENCH_RECEIVER_DELAY_MS", "0")) / 1000


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    if DELAY:
        await asyncio.sleep(DELAY)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
