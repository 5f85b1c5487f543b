"""The ledger's group commit: a read that fails inside the database costs no other call its answer."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from sqlalchemy import select, text

from prism.apps.params import NoParams
from prism.auth.authenticator import Authenticator
from prism.config import Settings
from prism.dispatch.dispatcher import Call, Dispatcher, _draft
from prism.ledger.writer import FinishFailed
from prism.models import AuditEntry
from prism.registry import HandlerApp, HandlerCall
from prism.registry.registry import build_registry
from prism.storage import Database
from prism.tenancy.hosts import classify_host
from tests.factories import Factory
from tests.ledger_support import verified

faulty = HandlerApp("faulty", description="Handlers that fail inside the database.")


@faulty.handler("report_query", "probe", "explode", params=NoParams, scope="read", permission=None,
                description="Reads a table that does not exist.")
async def explode(call: HandlerCall, params: NoParams) -> Any:
    return (await call.session.execute(text("SELECT * FROM no_such_table"))).all()


async def test_a_read_failing_in_the_database_leaves_the_rest_of_its_batch_answered_and_chained(
        db: Database, factory: Factory, settings: Settings) -> None:
    registry = build_registry()
    registry.frozen = False
    registry.add_app(faulty)
    registry.freeze()
    dispatcher = Dispatcher(db, registry, settings)
    ws = await factory.workspace(roles=("owner",))
    auth = await Authenticator(db, cache_seconds=0).authenticate(
        f"Bearer {ws.keys['owner']}", classify_host(ws.host, "localhost"))
    whoami = Call("prism_whoami", "rest", {})
    boom = Call("prism_report_query", "rest", {}, operation="explode", app="faulty", entity="probe")
    try:
        # Submitted together, so they share batches: on PostgreSQL the failed read aborts its transaction.
        calls = [boom if i % 10 == 3 else whoami for i in range(40)]
        results = await asyncio.gather(*(dispatcher.dispatch(auth, c) for c in calls), return_exceptions=True)
    finally:
        await dispatcher.close()
    answered = [r for c, r in zip(calls, results, strict=True) if c is whoami]
    failed = [r for c, r in zip(calls, results, strict=True) if c is boom]
    assert all(isinstance(r, tuple) and r[1]["user"]["email"] == ws.emails["owner"] for r in answered), answered
    assert len(failed) == 4 and all(isinstance(r, Exception) for r in failed)
    report = await verified(db, ws.org.id)
    async with db.read() as session:
        entries = (await session.execute(select(AuditEntry).where(AuditEntry.organization_id == ws.org.id)
                                         .order_by(AuditEntry.seq))).scalars().all()
    assert len(entries) == 40 and report.valid, report
    assert [e.outcome for e in entries if e.coordinate == "report_query/faulty/probe/explode"] == ["refused"] * 4


async def test_a_dispatch_does_not_ask_asyncio_for_the_running_loop(
        db: Database, factory: Factory, settings: Settings, monkeypatch: Any) -> None:
    """In Python 3.11 `asyncio.get_running_loop()` makes a system call (getpid); the ledger writer keeps its loop
    instead of asking for it on every dispatch (one system call per request, measured under load). On SQLite the
    batch's commit asks once, to hand the commit to a thread (prism.storage.sqlite_driver): once per batch."""
    dispatcher = Dispatcher(db, build_registry(), settings)
    ws = await factory.workspace(roles=("owner",))
    auth = await Authenticator(db, cache_seconds=0).authenticate(
        f"Bearer {ws.keys['owner']}", classify_host(ws.host, "localhost"))
    whoami = Call("prism_whoami", "rest", {})
    asked = 0
    ask = asyncio.get_running_loop

    def counting() -> asyncio.AbstractEventLoop:
        nonlocal asked
        # Not the sealer's sweep: it runs beside the dispatches, and on a database shared with other tests it finds
        # their logs too (a rewritten head, a checkpoint due).
        task = asyncio.current_task()
        if task is None or task.get_name() != "prism-ledger-sealer":
            asked += 1
        return ask()

    try:
        await dispatcher.dispatch(auth, whoami)  # starts the writer, which may ask once
        monkeypatch.setattr(asyncio, "get_running_loop", counting)
        results = await asyncio.gather(*(dispatcher.dispatch(auth, whoami) for _ in range(20)))
    finally:
        monkeypatch.undo()
        await dispatcher.close()
    assert len(results) == 20 and asked <= 1


async def test_a_call_whose_governance_record_cannot_be_written_is_refused_alone(
        db: Database, factory: Factory, settings: Settings) -> None:
    """A unit's `finish` (what governance writes with the call: a decision, an oversight request) that raises ends
    the batch's transaction; the batch runs again with that call refused and recorded as refused, and every other
    call of the batch answered as if it had been alone."""
    dispatcher = Dispatcher(db, build_registry(), settings)
    ws = await factory.workspace(roles=("owner",))
    auth = await Authenticator(db, cache_seconds=0).authenticate(
        f"Bearer {ws.keys['owner']}", classify_host(ws.host, "localhost"))
    whoami = Call("prism_whoami", "rest", {})
    handler = dispatcher.resolve(whoami)

    async def unwritable(session: Any, error: BaseException | None) -> None:
        session.add(AuditEntry())  # a row every NOT NULL column refuses: the flush fails, and the transaction
        await session.flush()

    async def poisoned() -> Any:
        return await dispatcher.ledger.run(auth.organization_id, lambda session: _answer(session),
                                           partial(_draft, auth, whoami, handler), writes=False, finish=unwritable)

    try:
        calls = [poisoned() if i % 10 == 3 else dispatcher.dispatch(auth, whoami) for i in range(30)]
        results = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        await dispatcher.close()
    refused = [r for i, r in enumerate(results) if i % 10 == 3]
    answered = [r for i, r in enumerate(results) if i % 10 != 3]
    assert all(isinstance(r, FinishFailed) for r in refused), refused
    assert all(isinstance(r, tuple) and r[1]["user"]["email"] == ws.emails["owner"] for r in answered), answered
    report = await verified(db, ws.org.id)
    async with db.read() as session:
        outcomes = (await session.execute(select(AuditEntry.outcome, AuditEntry.error_code).where(
            AuditEntry.organization_id == ws.org.id))).all()
    assert report.valid, report
    assert sorted(tuple(o) for o in outcomes) == sorted([("allowed", None)] * 27 + [("refused", "internal_error")] * 3)


async def _answer(session: Any) -> dict[str, Any]:
    return {"ok": True}
