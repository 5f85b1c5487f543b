"""The delivery worker resolves receivers' hosts on threads of its own (prism.kit.outbound.DELIVERY_LOOKUPS), within
RESOLVE_WITHIN_SECONDS: deliveries to hosts whose DNS servers never answer cannot take the event loop's default
executor from the rest of `prism serve` (a document upload, indexed there, stays prompt), and each such delivery's
attempt fails after that time and is retried later, rather than holding its worker's slot for the webhook's whole
timeout. One that finds every lookup thread taken is not sent: it is put off, its status and attempt count kept.

The slow DNS is real, as in tests/test_webhooks_dns_lookups_own_threads.py: the app, with its in-process worker,
runs in a mount namespace whose /etc/resolv.conf names a local DNS server that never answers. Its webhooks are saved
with private networks allowed, which skips the save-time lookup; the connect-time lookup runs all the same.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from prism.kit.outbound import DELIVERY_LOOKUPS_AT_ONCE, DELIVERY_LOOKUPS_PER_ORGANIZATION, RESOLVE_WITHIN_SECONDS
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.processes import HOST
from tests.test_webhooks_dns_lookups_own_threads import (  # noqa: F401
    RESOLVER_TIMEOUT_SECONDS,
    default_executor_probe,
    owner_workspace,
    silent_dns_fixture,
    start_app_with_resolver,
    wait_ready,
)
from tests.webhooks_fixtures import BASE

# Receivers whose hosts never resolve, each a host of its own: more than the default executor's threads
# (min(32, cores + 4)) and more than the delivery lookups' threads.
HANGING_HOSTS = max(DELIVERY_LOOKUPS_AT_ONCE, min(32, (os.cpu_count() or 1) + 4)) + 4
UNANSWERED = f"did not resolve within {RESOLVE_WITHIN_SECONDS:g} s"


async def more_workspaces(database_url: str, count: int) -> list[Workspace]:
    db = Database(database_url)
    try:
        return [await Factory(db).workspace(roles=("owner",)) for _ in range(count)]
    finally:
        await db.dispose()


@pytest.mark.engine_independent
async def test_deliveries_to_hosts_whose_dns_never_answers_fail_their_attempt_and_leave_the_process_free(
        silent_dns: str, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'prism.db'}"
    ws = await owner_workspace(database_url)
    # Spread over organizations, each within its share of the lookup threads, so that together they take them all.
    organizations = [ws, *await more_workspaces(database_url, -(-HANGING_HOSTS // DELIVERY_LOOKUPS_PER_ORGANIZATION)
                                                - 1)]
    process, port = start_app_with_resolver(
        tmp_path, silent_dns, database_url, PRISM_WEBHOOK_WORKER_IN_PROCESS="true",
        PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", PRISM_WEBHOOK_WORKER_CONCURRENCY=str(HANGING_HOSTS + 4))
    try:
        await wait_ready(process, port, tmp_path)
        async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=60) as client:
            hooks: list[tuple[Workspace, str]] = []
            for index in range(HANGING_HOSTS):  # a webhook timeout well beyond the lookups' time limit
                owner = organizations[index // DELIVERY_LOOKUPS_PER_ORGANIZATION]
                made = await client.post(BASE, headers=owner.headers(), json={
                    "name": f"silent {index}", "url": f"https://h{index}.silent-dns.test/hook",
                    "timeout_seconds": 30})
                assert made.status_code == 201, made.text
                hooks.append((owner, made.json()["id"]))
            alone = await default_executor_probe(client, ws, "delivery-time DNS lookups")
            began = time.monotonic()
            for owner, hook_id in hooks:  # the in-process worker is woken at once and sends each
                sent = await client.post(f"{BASE}{hook_id}/test/", headers=owner.headers())
                assert sent.status_code == 202, sent.text
            await asyncio.sleep(1.0)  # every delivery has reached its lookup (or failed at once)
            during = await default_executor_probe(client, ws, "delivery-time DNS lookups")
            assert during < alone + 3, f"an upload took {during:.1f} s during the lookups ({alone:.1f} s alone)"

            # Each attempt that got a lookup thread ends within the lookups' time limit (not the webhook's 30 s,
            # nor the resolver's 20 s): a failed attempt, retried later. The others were not sent: put off, pending.
            outcomes: list[dict[str, object]] = []
            while time.monotonic() - began < RESOLVE_WITHIN_SECONDS + 10:
                outcomes = []
                for owner, hook_id in hooks:
                    listed = await client.get(f"{BASE}{hook_id}/deliveries/", headers=owner.headers())
                    outcomes += listed.json()["items"]
                if sum(o["status"] == "retrying" for o in outcomes) >= DELIVERY_LOOKUPS_AT_ONCE:
                    break
                await asyncio.sleep(0.5)
            tried = [o for o in outcomes if o["attempt_count"] == 1]
            put_off = [o for o in outcomes if o["attempt_count"] == 0]
            assert len(tried) == DELIVERY_LOOKUPS_AT_ONCE and len(put_off) == HANGING_HOSTS - len(tried), outcomes
            assert all(o["status"] == "retrying" and UNANSWERED in str(o["error_message"]) and o["next_retry_at"]
                       for o in tried), tried
            assert all(o["status"] == "pending" and o["error_message"] is None and o["next_retry_at"]
                       for o in put_off), put_off
    finally:
        process.terminate()
        try:
            process.wait(timeout=RESOLVER_TIMEOUT_SECONDS + 10)  # exit joins the lookup threads still running
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
