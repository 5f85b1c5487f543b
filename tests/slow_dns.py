"""DNS that answers when a test lets it: a stand-in at Prism's own seam, `prism.kit.outbound.resolve` (the one
place Prism asks the system resolver). Names under `slow-dns.test` wait for `answer` and then resolve to a public
address; every other name resolves as the system does. Tests that need a resolver that really never answers run
Prism under `unshare` instead (tests/test_webhooks_dns_lookups_own_threads.py)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator

import pytest

from prism.kit import outbound
from prism.kit.outbound import IPAddress, LookupThreads

SLOW_DOMAIN = "slow-dns.test"
PUBLIC = ipaddress.ip_address("93.184.215.14")
REAL_RESOLVE = outbound.resolve


class SlowDns:
    def __init__(self) -> None:
        self.waiting = 0
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def resolve(self, host: str, port: int, *, lookups: LookupThreads | None = None) -> list[IPAddress]:
        if not host.endswith(SLOW_DOMAIN):
            return await REAL_RESOLVE(host, port, lookups=lookups)
        self.waiting += 1
        self.asked.set()
        try:
            await self.answer.wait()
        finally:
            self.waiting -= 1
        return [PUBLIC]

    async def until_waiting(self, count: int) -> None:
        """Once `count` lookups wait for their answer."""
        while self.waiting < count:
            self.asked.clear()
            await self.asked.wait()


@pytest.fixture(name="slow_dns")
async def slow_dns_fixture(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SlowDns]:
    dns = SlowDns()
    monkeypatch.setattr(outbound, "resolve", dns.resolve)
    yield dns
    dns.answer.set()
