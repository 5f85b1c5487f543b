"""The delivery worker resolves receivers' hosts on threads of its own (prism.kit.outbound.DELIVERY_LOOKUPS), within
RESOLVE_WITHIN_SECONDS: deliveries to hosts whose DNS servers never answer cannot take the event loop's default
executor from the rest of `prism serve` (a document upload, indexed there, stays prompt), and each such delivery's
attempt fails after that time (or at once, when every lookup thread is taken) and is retried later, rather than
holding its worker's slot for the webhook's whole timeout.

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

from prism.kit.outbound import DELIVERY_LOOKUPS_AT_ONCE, RESOLVE_WITHIN_SECONDS
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
BUSY = "too many host names are being resolved right now"
UNANSWERED = f"did not resolve within {RESOLVE_WITHIN_SECONDS:g} s"


@pytest.mark.engine_independent
async def test_deliveries_to_hosts_whose_dns_never_answers_fail_their_attempt_and_leave_the_process_free(
        silent_dns: str, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'prism.db'}"
    ws = await owner_workspace(database_url)
    process, port = start_app_with_resolver(
        tmp_path, silent_dns, database_url, PRISM_WEBHOOK_WORKER_IN_PROCESS="true",
        PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS="true", PRISM_WEBHOOK_WORKER_CONCURRENCY=str(HANGING_HOSTS + 4))
    try:
        await wait_ready(process, port, tmp_path)
        async with httpx.AsyncClient(base_url=f"http://{HOST}:{port}", timeout=60) as client:
            hooks = []
            for index in range(HANGING_HOSTS):  # a webhook timeout well beyond the lookups' time limit
                made = await client.post(BASE, headers=ws.headers(), json={
                    "name": f"silent {index}", "url": f"https://h{index}.silent-dns.test/hook",
                    "timeout_seconds": 30})
                assert made.status_code == 201, made.text
                hooks.append(made.json()["id"])
            alone = await default_executor_probe(client, ws, "delivery-time DNS lookups")
            began = time.monotonic()
            for hook_id in hooks:  # the in-process worker is woken at once and sends each
                sent = await client.post(f"{BASE}{hook_id}/test/", headers=ws.headers())
                assert sent.status_code == 202, sent.text
            await asyncio.sleep(1.0)  # every delivery has reached its lookup (or failed at once)
            during = await default_executor_probe(client, ws, "delivery-time DNS lookups")
            assert during < alone + 3, f"an upload took {during:.1f} s during the lookups ({alone:.1f} s alone)"

            # Each attempt ends within the lookups' time limit (not the webhook's 30 s, nor the resolver's 20 s):
            # a failed attempt, retried later.
            outcomes: list[dict[str, object]] = []
            while time.monotonic() - began < RESOLVE_WITHIN_SECONDS + 10:
                outcomes = []
                for hook_id in hooks:
                    listed = await client.get(f"{BASE}{hook_id}/deliveries/", headers=ws.headers())
                    outcomes += listed.json()["items"]
                if all(o["status"] == "retrying" for o in outcomes):
                    break
                await asyncio.sleep(0.5)
            assert all(o["status"] == "retrying" and o["attempt_count"] == 1 and o["next_retry_at"]
                       for o in outcomes), outcomes
            errors = [str(o["error_message"]) for o in outcomes]
            unanswered = [e for e in errors if UNANSWERED in e]
            busy = [e for e in errors if BUSY in e]
            assert len(unanswered) == DELIVERY_LOOKUPS_AT_ONCE and len(busy) == HANGING_HOSTS - len(unanswered), errors
    finally:
        process.terminate()
        try:
            process.wait(timeout=RESOLVER_TIMEOUT_SECONDS + 10)  # exit joins the lookup threads still running
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
