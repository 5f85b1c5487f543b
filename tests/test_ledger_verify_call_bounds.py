"""A verification through the API reads at most MAX_VERIFIED_IN_A_CALL entries (400 `verification_too_long`
beyond, docs/audit.md), counted from the entries stored: a head whose tree_size someone raised in the database is
a broken log (entries missing from the end), not a log too long to verify in a call."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import update

from prism.apps.ledger import handlers
from prism.ledger.entries import audit_heads
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.ledger_support import sealed_log

VERIFY = "audit_query/ledger/log/verify"


async def test_a_log_longer_than_a_call_verifies_is_refused_as_too_long(
        client: httpx.AsyncClient, factory: Factory, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "MAX_VERIFIED_IN_A_CALL", 3)
    ws = await sealed_log(client, factory, db, calls=5)
    refused = await post(client, ws, VERIFY, {"start": "first_entry"})
    assert refused.status_code == 400 and refused.json()["error"] == "verification_too_long", refused.text


async def test_a_head_whose_size_was_raised_is_reported_broken_not_too_long(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await sealed_log(client, factory, db, calls=3)
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                        .values(tree_size=10**12))
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is False and "head" in report["reason"], report  # its signature no longer fits
