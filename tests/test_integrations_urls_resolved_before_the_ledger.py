"""An integration endpoint's base URL and a connection's base URL are resolved (the SSRF guard's save-time check)
before the call's ledger transaction, which the calls of every organization may wait on: a host whose DNS servers
answer slowly holds only the call that named it, not the ledger's lanes.

Everything is real (HTTP, dispatcher, ledger, database) except DNS, stood in for at Prism's own seam,
`prism.kit.outbound.resolve` (the one place Prism asks the system resolver): a name under `slow-dns.test` answers
once the test lets it. As many slow saves as the ledger has lanes wait on it at once, each of another
organization; were any lookup made inside its transaction, every lane would be held and another organization's
write could not commit."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from prism.ledger.writer import LANES
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post
from tests.slow_dns import SLOW_DOMAIN, SlowDns
from tests.test_integrations_url_secrets import ITEMS

SLOW = SLOW_DOMAIN


Save = Callable[[Workspace, str], Awaitable[httpx.Response]]


async def _ready_to_save(client: httpx.AsyncClient, ws: Workspace, change: str, dns: SlowDns) -> Save:
    """What the organization `ws` saves a URL with for `change`, its preconditions made (their hosts answering)."""
    if change == "endpoint_create":
        return lambda w, url: post(client, w, "entity_crud/integrations/endpoint/create",
                                   {"name": "ERP", "base_url": url})
    dns.answer.set()
    try:
        if change == "endpoint_update":
            made = await ok(client, ws, "entity_crud/integrations/endpoint/create",
                            {"name": "ERP", "base_url": f"https://first.{SLOW}/api"})
            return lambda w, url: post(client, w, "entity_crud/integrations/endpoint/update",
                                       {"id": made["id"], "base_url": url})
        name = "slow_" + uuid.uuid4().hex[:8]
        await ok(client, ws, "config_manage/integrations/integration/importOpenapi", {"name": name, "spec": ITEMS})
        return lambda w, url: post(client, w, "config_manage/integrations/connection/set",
                                   {"name": name, "base_url": url})
    finally:
        dns.answer.clear()


@pytest.mark.parametrize("change", ["endpoint_create", "endpoint_update", "connection_set"])
async def test_a_slow_dns_answer_holds_only_its_own_save(client: httpx.AsyncClient, factory: Factory,
                                                         slow_dns: SlowDns, change: str) -> None:
    slow = [await factory.workspace(roles=("owner",)) for _ in range(LANES)]
    other = await factory.workspace(roles=("owner",))
    saves = [await _ready_to_save(client, ws, change, slow_dns) for ws in slow]
    saving = [asyncio.create_task(save(ws, f"https://{i}.{SLOW}/api?api_key=k{i}"))
              for i, (ws, save) in enumerate(zip(slow, saves, strict=True))]
    await asyncio.wait_for(slow_dns.until_waiting(LANES), 10)

    # While every slow save waits for its DNS answer, another organization's write commits.
    part = await asyncio.wait_for(ok(client, other, "entity_crud/spare_parts/spare_part/create",
                                     {"sku": "B7", "name": "bolt"}), 5)
    assert part["sku"] == "B7"
    assert not any(task.done() for task in saving)

    slow_dns.answer.set()
    answers: list[Any] = await asyncio.wait_for(asyncio.gather(*saving), 10)
    for i, answer in enumerate(answers):
        assert answer.status_code == 200, answer.text
        assert answer.json()["data"]["base_url"] == f"https://{i}.{SLOW}/api?api_key=********"


@pytest.mark.parametrize("change", ["endpoint_create", "endpoint_update", "connection_set"])
async def test_a_refused_host_is_still_refused_after_the_callers_own_refusals(
        client: httpx.AsyncClient, factory: Factory, slow_dns: SlowDns, change: str) -> None:
    """Resolved before the transaction, refused where it was before: a loopback URL is 400 `url_not_allowed`, and an
    unknown record or integration is still 404 first."""
    ws = await factory.workspace(roles=("owner",))
    save = await _ready_to_save(client, ws, change, slow_dns)
    refused = await save(ws, "https://127.0.0.1/api")
    assert refused.status_code == 400 and refused.json()["error"] == "url_not_allowed", refused.text
    assert "base_url" in refused.json()["message"]
    if change == "endpoint_update":
        unknown = await post(client, ws, "entity_crud/integrations/endpoint/update",
                             {"id": str(uuid.uuid4()), "base_url": "https://127.0.0.1/api"})
        assert unknown.status_code == 404, unknown.text
    elif change == "connection_set":
        unknown = await post(client, ws, "config_manage/integrations/connection/set",
                             {"name": "nothing_" + uuid.uuid4().hex[:8], "base_url": "https://127.0.0.1/api"})
        assert unknown.status_code == 404, unknown.text
