"""Delivery lookups whose DNS stalls, in one organization, cost another organization nothing.

A process resolves receivers' hosts on DELIVERY_LOOKUPS_AT_ONCE threads shared by every organization's deliveries,
of which one organization's take at most DELIVERY_LOOKUPS_PER_ORGANIZATION; a delivery that finds no thread free
(LookupBusy) was not sent: it is put off by RESOLVE_WITHIN_SECONDS, keeping its status and attempt count, and counts
toward no failure run, so it can neither fail nor switch its webhook off.

DNS is the system resolver's (`socket.getaddrinfo` as prism.kit.outbound calls it), stood in for so that hosts under
STALL never answer until the test lets them fail; the lookup threads, the workers, the receiver and the database are
real.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import types
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from prism.config import Settings
from prism.kit import outbound
from prism.kit.outbound import DELIVERY_LOOKUPS_AT_ONCE, DELIVERY_LOOKUPS_PER_ORGANIZATION, RESOLVE_WITHIN_SECONDS
from prism.storage import Database
from prism.webhooks.models import Webhook, WebhookDelivery
from prism.webhooks.worker import DeliveryWorker
from tests.factories import Factory, Workspace
from tests.test_webhooks_workers import burst
from tests.webhooks_fixtures import BASE, FakeClock, create_hook, deliveries_of, unique_path
from tests.webhooks_receiver import Receiver

STALL = ".stall.test"


class StalledDns:
    """Lookups of hosts under STALL hold their thread until `release` (then fail as a DNS timeout would)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.stalled: list[str] = []
        self._changed = threading.Condition()

    def getaddrinfo(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if str(host).endswith(STALL):
            with self._changed:
                self.stalled.append(host)
                self._changed.notify_all()
            self.release.wait(30)
            raise socket.gaierror("Temporary failure in name resolution")
        return socket.getaddrinfo(host, port, *args, **kwargs)

    async def wait_stalled(self, count: int) -> None:
        def wait() -> bool:
            with self._changed:
                return self._changed.wait_for(lambda: len(self.stalled) >= count, timeout=10)

        assert await asyncio.to_thread(wait), f"{len(self.stalled)} lookups stalled, not {count}"


@pytest.fixture(name="dns")
def dns_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[StalledDns]:
    dns = StalledDns()
    monkeypatch.setattr(outbound, "socket", types.SimpleNamespace(getaddrinfo=dns.getaddrinfo,
                                                                  SOCK_STREAM=socket.SOCK_STREAM))
    yield dns
    dns.release.set()


@pytest.fixture(name="strict")
def strict_fixture(hook_settings: Settings) -> Settings:
    """One FAILED delivery switches a webhook off: a busy resolver counted as a failure would show at once."""
    return hook_settings.model_copy(update={"webhook_deactivate_after_failures": 1})


async def stalling_organization(client: httpx.AsyncClient, factory: Factory, hooks: int) -> Workspace:
    """An organization with `hooks` webhooks, each to a host of its own (lookups of one host are shared)."""
    ws = await factory.workspace(roles=("owner",))
    for _ in range(hooks):
        await create_hook(client, ws, f"https://{uuid.uuid4().hex}{STALL}/", timeout_seconds=30)
    return ws


async def webhook_row(db: Database, webhook_id: str) -> Webhook:
    async with db.read() as session:
        row: Webhook = (await session.execute(select(Webhook).where(Webhook.id == webhook_id))).scalar_one()
        return row


@pytest.fixture(name="background")
async def background_fixture(dns: StalledDns) -> AsyncIterator[list[asyncio.Task[int]]]:
    """Workers sending the stalling organizations' deliveries; awaited once their lookups are let go."""
    tasks: list[asyncio.Task[int]] = []
    yield tasks
    dns.release.set()
    await asyncio.gather(*tasks)


async def test_one_organization_takes_only_its_share_of_the_lookup_threads(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], strict: Settings, dns: StalledDns,
        background: list[asyncio.Task[int]]) -> None:
    stalling = await stalling_organization(hook_client, factory, DELIVERY_LOOKUPS_AT_ONCE)
    victim = await factory.workspace(roles=("owner",))
    path = unique_path()
    mine = await create_hook(hook_client, victim, receiver.url(path, host="localhost"), max_retries=0)

    await burst(hook_db, stalling, 1)  # a delivery per stalling webhook, each to a host of its own
    background.append(asyncio.create_task(make_worker(strict, concurrency=DELIVERY_LOOKUPS_AT_ONCE).run_once()))
    await dns.wait_stalled(DELIVERY_LOOKUPS_PER_ORGANIZATION)
    await burst(hook_db, victim, 1)
    await make_worker(strict).run_once()  # while the stalling organization's lookups still hold their threads

    [delivery] = await deliveries_of(hook_client, victim, mine["id"])
    assert delivery["status"] == "success", delivery
    assert len(receiver.at(path)) == 1
    assert len(dns.stalled) == DELIVERY_LOOKUPS_PER_ORGANIZATION, "one organization took more than its share"

    # The stalling organization's other deliveries were put off, not failed: no attempt, due again shortly.
    await asyncio.wait_for(asyncio.shield(background[0]), RESOLVE_WITHIN_SECONDS + 10)
    theirs = [d for hook in await hooks_of(hook_client, stalling) for d in await deliveries_of(hook_client, stalling,
                                                                                                hook)]
    tried = [d for d in theirs if d["attempt_count"] == 1]
    put_off = [d for d in theirs if d["attempt_count"] == 0]
    assert len(tried) == DELIVERY_LOOKUPS_PER_ORGANIZATION and len(put_off) == len(theirs) - len(tried), theirs
    assert all(d["status"] == "retrying" and "did not resolve within" in d["error_message"] for d in tried), tried
    assert all(d["status"] == "pending" and d["error_message"] is None and d["next_retry_at"] for d in put_off)


async def hooks_of(client: httpx.AsyncClient, ws: Workspace) -> list[str]:
    listed = await client.get(BASE, headers=ws.headers(), params={"page_size": 100})
    assert listed.status_code == 200, listed.text
    return [hook["id"] for hook in listed.json()["results"]]


async def test_a_busy_resolver_neither_fails_nor_counts_against_another_organizations_webhook(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory, receiver: Receiver,
        make_worker: Callable[..., DeliveryWorker], strict: Settings, dns: StalledDns,
        background: list[asyncio.Task[int]]) -> None:
    # Enough organizations, each within its share, to take every delivery lookup thread of the process.
    for _ in range(DELIVERY_LOOKUPS_AT_ONCE // DELIVERY_LOOKUPS_PER_ORGANIZATION):
        stalling = await stalling_organization(hook_client, factory, DELIVERY_LOOKUPS_PER_ORGANIZATION)
        await burst(hook_db, stalling, 1)
    background.append(asyncio.create_task(make_worker(strict, concurrency=DELIVERY_LOOKUPS_AT_ONCE).run_once()))
    await dns.wait_stalled(DELIVERY_LOOKUPS_AT_ONCE)

    victim = await factory.workspace(roles=("owner",))
    path = unique_path()
    mine = await create_hook(hook_client, victim, receiver.url(path, host="localhost"), max_retries=1)
    await burst(hook_db, victim, 2)
    first, second = sorted(await deliveries_of(hook_client, victim, mine["id"]), key=lambda d: d["id"])
    async with hook_db.write() as session:  # one on its last retry: a counted attempt would make it FAILED
        await session.execute(update(WebhookDelivery).where(WebhookDelivery.id == second["id"])
                              .values(status="retrying", attempt_count=1, error_message="HTTP 500: earlier"))
    clock = FakeClock()
    began = time.monotonic()
    assert await make_worker(strict, clock=clock).run_once() == 2
    assert time.monotonic() - began < RESOLVE_WITHIN_SECONDS, "a busy resolver is refused at once"

    after = {d["id"]: d for d in await deliveries_of(hook_client, victim, mine["id"])}
    due_again = clock.now + timedelta(seconds=RESOLVE_WITHIN_SECONDS)
    for before, status, attempts, error in ((first, "pending", 0, None),
                                            (second, "retrying", 1, "HTTP 500: earlier")):
        delivery = after[before["id"]]
        assert (delivery["status"], delivery["attempt_count"], delivery["error_message"]) == (status, attempts, error)
        assert abs((datetime.fromisoformat(delivery["next_retry_at"]) - due_again).total_seconds()) < 1, delivery
    hook = await webhook_row(hook_db, mine["id"])
    assert hook.is_active and hook.consecutive_failures == 0
    assert receiver.at(path) == []

    # Once lookup threads are free again, both are sent when due.
    dns.release.set()
    await asyncio.gather(*background)
    clock.advance(RESOLVE_WITHIN_SECONDS)
    assert await make_worker(strict, clock=clock).run_once() == 2
    assert {d["status"] for d in await deliveries_of(hook_client, victim, mine["id"])} == {"success"}
    assert len(receiver.at(path)) == 2
