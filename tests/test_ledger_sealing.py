"""Sealing in the call's own transaction: an entry has its position when its call answers, unless another
transaction holds its organization's head, and then the call does not wait for it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select, text

from prism.auth.authenticator import Authenticator
from prism.config import Settings
from prism.dispatch.dispatcher import Call, Dispatcher
from prism.ledger.sealer import Sealer
from prism.models import AuditEntry
from prism.registry.registry import build_registry
from prism.storage import Database
from prism.tenancy.hosts import classify_host
from tests.factories import Factory, Workspace
from tests.ledger_support import verified

WHOAMI = Call("prism_whoami", "rest", {})


def _sealed(when: str) -> float:
    """prism_ledger_entries_sealed_total{when=...} of this process."""
    return REGISTRY.get_sample_value("prism_ledger_entries_sealed_total", {"when": when}) or 0.0


async def _entries(db: Database, organization_id: str) -> list[AuditEntry]:
    async with db.read() as session:
        return list((await session.execute(select(AuditEntry).where(AuditEntry.organization_id == organization_id)
                                           .order_by(AuditEntry.id))).scalars().all())


async def _owner_dispatcher(db: Database, settings: Settings, ws: Workspace) -> tuple[Dispatcher, Any]:
    auth = await Authenticator(db, cache_seconds=0).authenticate(
        f"Bearer {ws.keys['owner']}", classify_host(ws.host, "localhost"))
    return Dispatcher(db, build_registry(), settings), auth


@pytest.fixture
def sealer_requests(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """The organizations each batch leaves to the sealer task, which is kept from running: what a test then reads
    was sealed by the call's own transaction, or is still waiting."""
    asked: list[set[str]] = []
    monkeypatch.setattr(Sealer, "request", lambda self, organization_ids: asked.append(set(organization_ids)))
    return asked


async def test_an_entry_is_sealed_by_its_calls_own_transaction_when_nothing_holds_the_head(
        db: Database, factory: Factory, settings: Settings, sealer_requests: list[set[str]]) -> None:
    ws = await factory.workspace(roles=("owner",))
    dispatcher, auth = await _owner_dispatcher(db, settings, ws)
    try:
        before, counted = len(await _entries(db, ws.org.id)), _sealed("with_call")
        await asyncio.gather(*(dispatcher.dispatch(auth, WHOAMI) for _ in range(12)))
    finally:
        await dispatcher.close()
    entries = (await _entries(db, ws.org.id))[before:]
    assert len(entries) == 12 and all(entry.seq is not None for entry in entries), [e.seq for e in entries]
    assert sealer_requests == [] and _sealed("with_call") == counted + 12
    report = await verified(db, ws.org.id)
    assert report.valid and report.waiting == 0, report


async def test_a_call_does_not_wait_for_a_held_head_and_its_entry_is_sealed_after(
        database_url: str, db: Database, factory: Factory, settings: Settings,
        sealer_requests: list[set[str]]) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: the batch holds the database's write lock, so no head is held elsewhere")
    ws = await factory.workspace(roles=("owner",))
    other = await factory.workspace(roles=("owner",))
    dispatcher, auth = await _owner_dispatcher(db, settings, ws)
    _, other_auth = await _owner_dispatcher(db, settings, other)
    before = len(await _entries(db, ws.org.id))
    counted = {when: _sealed(when) for when in ("with_call", "after_commit")}
    try:
        async with db.write() as holder:  # another sealer, say, holding the first organization's head
            await holder.execute(text("SELECT 1 FROM audit_heads WHERE organization_id = :org FOR NO KEY UPDATE"),
                                 {"org": ws.org.id})
            # The two organizations' calls share batches: the held log waits, the other is sealed at once.
            answered = await asyncio.wait_for(asyncio.gather(
                *(dispatcher.dispatch(auth if i % 2 else other_auth, WHOAMI) for i in range(10))), timeout=10)
            assert len(answered) == 10
            waiting = (await _entries(db, ws.org.id))[before:]
            assert [e.seq for e in waiting] == [None] * 5
            assert all(e.seq is not None for e in await _entries(db, other.org.id))
    finally:
        await dispatcher.close()
    assert sealer_requests and set().union(*sealer_requests) == {ws.org.id}
    assert _sealed("with_call") == counted["with_call"] + 5
    report = await verified(db, ws.org.id)  # seals the backlog, as the sealer task does after the commit
    assert report.valid and report.waiting == 0 and report.tree_size == before + 5, report
    assert _sealed("after_commit") == counted["after_commit"] + 5
