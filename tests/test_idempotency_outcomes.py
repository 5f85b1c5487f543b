"""Which outcomes a key keeps: a handler's data and its refusals, the final answer of a call whose outbound part
runs after its commit (a repeat meanwhile is 409 idempotency_key_in_progress), and never Prism's own failure,
which the handler's savepoint undid: a retry runs the call. A replay spends nothing of a mission's budget."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from sqlalchemy import event, func, select
from starlette.applications import Starlette

from prism.config import Settings
from prism.integrations.call_records import keep_record
from prism.integrations.models import IntegrationCall
from prism.registry import AfterCommit, HandlerApp, HandlerCall
from tests.apps_support import running_app_with
from tests.factories import Factory, Workspace
from tests.governance_support import ok, post

once = HandlerApp("once", description="Handlers that count how often they run.")
RUNS: Counter[str] = Counter()
SEND_STARTED = asyncio.Event()
RELEASE_SEND = asyncio.Event()
# Tasks whose transactions are not a call's: the ledger's sealer and the webhook workers (prism.ledger.sealer,
# prism.webhooks) commit on their own schedule, whenever a test happens to be counting.
BACKGROUND = ("prism-ledger-sealer", "prism-webhook")


class Named(BaseModel):
    name: str


@once.handler("entity_crud", "counter", "flaky", params=Named, scope="write", permission=None,
              description="Fails with an unexpected error on its first run, succeeds after.")
async def flaky(call: HandlerCall, p: Named) -> dict[str, Any]:
    RUNS[p.name] += 1
    if RUNS[p.name] == 1:
        raise RuntimeError("a bug in a handler")
    return {"runs": RUNS[p.name]}


@once.handler("integration_call", "outbound", "send", params=Named, scope="execute", permission=None,
              description="Sends after its call is committed, once RELEASE_SEND is set.")
async def send_later(call: HandlerCall, p: Named) -> AfterCommit[int]:
    async def send() -> int:
        SEND_STARTED.set()
        await RELEASE_SEND.wait()
        RUNS[p.name] += 1
        return RUNS[p.name]

    async def record(done: HandlerCall, sent: int) -> dict[str, Any]:
        await keep_record(done, method="POST", path=f"/send/{p.name}", arguments_digest="0" * 64,
                          upstream_status=200, outcome="ok", attempts=1, duration_ms=1, error="")
        return {"sent": sent}

    return AfterCommit(send, record)


@pytest.fixture(scope="module")
async def once_app(settings: Settings) -> AsyncIterator[Starlette]:
    async with running_app_with(settings, once) as application:
        yield application


@pytest.fixture(scope="module")
async def once_client(once_app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=once_app), base_url="http://localhost") as client:
        yield client


async def call(client: httpx.AsyncClient, ws: Workspace, coordinate: str, name: str, key: str) -> httpx.Response:
    return await client.post(f"/prism/{coordinate}", headers={**ws.headers(), "Idempotency-Key": key},
                             json={"name": name})


async def test_a_call_that_failed_unexpectedly_keeps_nothing_and_its_retry_runs(
        once_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    name, key = f"flaky-{uuid.uuid4()}", str(uuid.uuid4())
    failed = await call(once_client, ws, "entity_crud/once/counter/flaky", name, key)
    assert failed.status_code == 500 and failed.json()["error"] == "internal_error"
    retried = await call(once_client, ws, "entity_crud/once/counter/flaky", name, key)
    assert retried.status_code == 200 and retried.json()["data"] == {"runs": 2}
    replayed = await call(once_client, ws, "entity_crud/once/counter/flaky", name, key)
    assert replayed.content == retried.content and replayed.headers["idempotent-replayed"] == "true"
    assert RUNS[name] == 2


async def test_a_call_finishing_after_its_commit_is_in_progress_then_replays_its_final_answer(
        once_client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace()
    name, key = f"send-{uuid.uuid4()}", str(uuid.uuid4())
    SEND_STARTED.clear()
    RELEASE_SEND.clear()
    first = asyncio.create_task(call(once_client, ws, "integration_call/once/outbound/send", name, key))
    await asyncio.wait_for(SEND_STARTED.wait(), 30)  # the first call has committed and is sending
    busy = await call(once_client, ws, "integration_call/once/outbound/send", name, key)
    assert busy.status_code == 409 and busy.json()["error"] == "idempotency_key_in_progress", busy.text
    assert busy.headers["retry-after"] == "1"
    RELEASE_SEND.set()
    done = await first
    assert done.status_code == 200 and done.json()["data"] == {"sent": 1}
    again = await call(once_client, ws, "integration_call/once/outbound/send", name, key)
    assert again.content == done.content and again.headers["idempotent-replayed"] == "true"
    assert RUNS[name] == 1


async def test_the_final_answer_is_stored_in_the_transaction_that_records_the_outbound_part(
        once_app: Starlette, once_client: httpx.AsyncClient, factory: Factory) -> None:
    """One transaction fewer per keyed call with an outbound part: its record and its key's answer commit together."""
    ws = await factory.workspace()
    name, key = f"send-{uuid.uuid4()}", str(uuid.uuid4())
    RELEASE_SEND.set()
    engine = once_app.state.db.engine.sync_engine
    open_transactions: dict[int, list[str]] = {}
    committed: list[list[str]] = []
    background: set[int] = set()  # connections in a transaction of a background task, not of the call

    def began(conn: Any) -> None:
        open_transactions[id(conn)] = []
        task = asyncio.current_task()
        if task is not None and task.get_name().startswith(BACKGROUND):  # the sealer's sweeps, webhook workers
            background.add(id(conn))

    def executed(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        open_transactions.setdefault(id(conn), []).append(statement.split("(")[0].strip().lower())

    def commit(conn: Any) -> None:
        statements = open_transactions.pop(id(conn), [])
        if id(conn) in background:
            background.discard(id(conn))
        else:
            committed.append(statements)

    listeners = (("begin", began), ("before_cursor_execute", executed), ("commit", commit))
    for name_of_event, listener in listeners:
        event.listen(engine, name_of_event, listener)
    try:
        done = await call(once_client, ws, "integration_call/once/outbound/send", name, key)
    finally:
        for name_of_event, listener in listeners:
            event.remove(engine, name_of_event, listener)
    assert done.status_code == 200 and done.json()["data"] == {"sent": 1}, done.text
    # After the batch that claimed the key (and committed the call's entry), one transaction: the record, with the
    # key's final answer. The key's statements and the record's insert are prepared statements, which statement
    # events do not see; the batch is the first transaction with a savepoint (its keyed unit runs in one).
    claimed = next(i for i, statements in enumerate(committed) if "savepoint sa_savepoint_1" in statements)
    after = committed[claimed + 1:]
    assert len(after) == 1, committed
    async with once_app.state.db.read() as session:
        recorded = await session.scalar(select(func.count()).select_from(IntegrationCall)
                                        .where(IntegrationCall.path == f"/send/{name}"))
    assert recorded == 1
    again = await call(once_client, ws, "integration_call/once/outbound/send", name, key)
    assert again.content == done.content and again.headers["idempotent-replayed"] == "true"
    assert RUNS[name] == 1


async def test_a_replay_under_a_mission_spends_nothing_and_the_mission_in_the_header_is_part_of_the_request(
        client: httpx.AsyncClient, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    made = await ok(client, ws, "mission_control/missions/mission/create", {"name": "close", "budget_ceiling": 5})
    await ok(client, ws, "mission_control/missions/mission/start", {"id": made["id"]})
    key = str(uuid.uuid4())
    keyed = {"X-Prism-Mission": made["id"], "Idempotency-Key": key}
    answers = [await post(client, ws, "entity_crud/spare_parts/spare_part/list", {}, headers=keyed)
               for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.headers.get("idempotent-replayed") for a in answers] == [None, "true", "true"]
    assert (await ok(client, ws, "mission_control/missions/mission/read", {"id": made["id"]}))["spent"] == 1
    outside = await post(client, ws, "entity_crud/spare_parts/spare_part/list", {}, headers={"Idempotency-Key": key})
    assert outside.status_code == 409 and outside.json()["error"] == "idempotency_key_reused"
