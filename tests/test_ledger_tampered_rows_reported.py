"""A tampered ledger row is reported, never a 500 or a traceback: a kept checkpoint's frontier rewritten, an entry
hash that is not hex, a malformed head or kept checkpoint read by the CLI."""

from __future__ import annotations

import httpx
from sqlalchemy import update

from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.storage import Database
from tests.factories import Factory
from tests.governance_support import ok, post
from tests.ledger_support import sealed_log
from tests.processes import TRACEBACK, run_cli

LIST, READ = "audit_query/ledger/entry/list", "audit_query/ledger/entry/read"
EXPORT, VERIFY = "audit_query/ledger/entry/export", "audit_query/ledger/log/verify"



async def test_a_kept_checkpoints_frontier_rewritten_is_reported_not_a_500(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: log/verify "names the first broken entry"; a kept checkpoint with a frontier that is not a
    list of hex strings must make the report invalid (as a non-hex frontier does), not fail the call."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_checkpoints).where(audit_checkpoints.c.organization_id == ws.org.id)
                        .values(frontier=[1]))
    response = await post(client, ws, VERIFY, {"start": "latest_checkpoint"})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["valid"] is False


async def test_an_entry_hash_rewritten_to_non_hex_does_not_break_the_ledger_listing(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: entry/read shows an entry with its content hash and MAC checked (`checks`); verification
    names an entry whose hash was rewritten. Listing, reading and exporting the log must still answer (the
    console's ledger page is how the tampering is seen), not fail with 500 on bytes.fromhex."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 2).values(entry_hash="z" * 64))
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is False and report["first_broken_seq"] == 2
    listed = await post(client, ws, LIST, {})
    assert listed.status_code == 200, listed.text


async def test_cli_verify_since_latest_reports_a_malformed_kept_checkpoint(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    """`prism audit verify --since latest` with a kept checkpoint whose text was rewritten: the API reports
    "the newest kept checkpoint is not valid"; the CLI must report it too (exit 1, one JSON line), never a
    traceback."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_checkpoints).where(audit_checkpoints.c.organization_id == ws.org.id)
                        .values(checkpoint="not a checkpoint"))
    result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--since", "latest", "--json",
                     database_url=database_url)
    assert TRACEBACK not in result.stderr, str(result)
    assert result.returncode == 1, str(result)


async def test_cli_checkpoint_reports_a_malformed_head(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    """`prism audit checkpoint` on a head whose checkpoint text was rewritten: a clean error, not a traceback
    (verification itself reports "the log's head holds no valid checkpoint")."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                        .values(checkpoint="{}"))
    result = run_cli("audit", "checkpoint", "--tenant", ws.tenant.subdomain, "--json", database_url=database_url)
    assert TRACEBACK not in result.stderr, str(result)
    assert result.returncode == 1, str(result)
