"""A webhook's receiver URL is resolved (the SSRF guard's save-time check) before the call's ledger transaction,
which the calls of every organization may wait on, and within a time limit: a host whose DNS servers answer
slowly, or never, holds only the call that named it.

DNS is stood in for at Prism's own seam, `prism.kit.outbound.resolve` (the one place Prism asks the system
resolver): a name under `slow-dns.test` answers once the test lets it, or never."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from prism.kit.outbound import RESOLVE_WITHIN_SECONDS
from prism.ledger.writer import LANES
from tests.factories import Factory
from tests.slow_dns import SlowDns
from tests.webhooks_fixtures import BASE

SLOW = "hooks.slow-dns.test"


@pytest.mark.parametrize("change", ["create", "update"])
async def test_a_slow_dns_answer_holds_only_its_own_call(client: httpx.AsyncClient, factory: Factory,
                                                         slow_dns: SlowDns, change: str) -> None:
    """As many slow saves as the ledger has lanes (PostgreSQL's; SQLite's one), each of another organization."""
    slow = [await factory.workspace(roles=("owner",)) for _ in range(LANES)]
    other = await factory.workspace(roles=("owner",))
    saving = []
    for index, ws in enumerate(slow):
        url = f"https://{index}.{SLOW}/hook"
        if change == "create":
            saving.append(client.post(BASE, json={"name": "slow", "url": url}, headers=ws.headers()))
            continue
        slow_dns.answer.set()
        made = await client.post(BASE, json={"name": "slow", "url": f"https://a.{SLOW}/"}, headers=ws.headers())
        assert made.status_code == 201, made.text
        slow_dns.answer.clear()
        saving.append(client.patch(f"{BASE}{made.json()['id']}/", json={"url": url}, headers=ws.headers()))
    saved = [asyncio.create_task(call) for call in saving]
    await asyncio.wait_for(slow_dns.until_waiting(LANES), 10)
    # While the slow calls wait for their DNS answers, another organization's calls, writes included, go on.
    listed = await asyncio.wait_for(client.get(BASE, headers=other.headers()), 3)
    assert listed.status_code == 200, listed.text
    created = await asyncio.wait_for(client.post(BASE, json={"name": "mine", "url": "https://127.0.0.1/x"},
                                                 headers=other.headers()), 3)
    assert created.status_code == 400, created.text  # refused (loopback), after its own transaction ran
    assert not any(task.done() for task in saved)
    slow_dns.answer.set()
    for index, answer in enumerate(await asyncio.wait_for(asyncio.gather(*saved), 10)):
        assert answer.status_code == (201 if change == "create" else 200), answer.text
        assert answer.json()["url"] == f"https://{index}.{SLOW}/hook"


async def test_a_dns_answer_that_never_comes_refuses_the_url_in_time(client: httpx.AsyncClient, factory: Factory,
                                                                     slow_dns: SlowDns) -> None:
    ws = await factory.workspace(roles=("owner",))
    started = time.monotonic()
    refused = await asyncio.wait_for(
        client.post(BASE, json={"name": "never", "url": f"https://{SLOW}/hook"}, headers=ws.headers()),
        RESOLVE_WITHIN_SECONDS + 5)
    assert time.monotonic() - started >= RESOLVE_WITHIN_SECONDS - 0.5
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
    assert f"host {SLOW} did not resolve within {RESOLVE_WITHIN_SECONDS:g} s" in refused.json()["message"]
