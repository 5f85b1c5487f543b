"""A tampered ledger row is reported, never a 500 or a traceback: a kept checkpoint's frontier rewritten, an entry
hash that is not hex (listed, proved, or waiting to be sealed), a malformed head or kept checkpoint read by the CLI."""

from __future__ import annotations

import httpx
from sqlalchemy import select, update

from prism.ledger.entries import (
    audit_checkpoints,
    audit_entries,
    audit_heads,
)
from prism.ledger.sealer import seal_all
from prism.ledger.verify import verify_log
from prism.storage import Database
from tests.factories import Factory, ledger_keys
from tests.governance_support import ok, post
from tests.ledger_support import sealed_log, write_waiting
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


async def test_a_waiting_entry_whose_hash_is_not_hex_does_not_stop_other_organizations_being_sealed(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """docs/audit.md: a sealer "leaves that log as it is and logs an error ..., and goes on with the other logs".
    A waiting entry whose entry_hash was rewritten so that it is not hex made sealing raise ValueError out of
    seal_all: every organization sealed after it (the sweep goes in id order, every second) was never sealed
    again, and `prism audit seal` ended in a traceback."""
    first, second = sorted([await sealed_log(client, factory, db, calls=2),
                            await sealed_log(client, factory, db, calls=2)], key=lambda w: w.org.id)
    tampered = await write_waiting(db, first, entry_hash="z" * 64)
    genuine = await write_waiting(db, second)
    await seal_all(db, [first.org.id, second.org.id], ledger_keys(), checkpoint_every=60.0)
    async with db.read() as s:
        sealed = dict((await s.execute(select(audit_entries.c.id, audit_entries.c.seq).where(
            audit_entries.c.id.in_([tampered, genuine])))).all())
        report = await verify_log(s, first.org.id, ledger_keys())
    assert sealed[genuine] == 3, sealed  # the other organization's entry was sealed
    assert sealed[tampered] is None, sealed  # the rewritten one is left waiting, for verification to name
    assert report.valid is False and report.first_broken_id == ledger_keys().entry_ref(first.org.id, tampered), report


async def test_cli_prove_on_a_log_with_an_entry_hash_that_is_not_hex_is_refused_not_a_traceback(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    """docs/audit.md: a log rewritten in the database is a refusal of the command, never a traceback. `prism audit
    prove` read every leaf with bytes.fromhex and ended in a ValueError traceback on a rewritten entry hash."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 2).values(entry_hash="z" * 64))
    for command in (("prove", "--seq", "3"), ("prove", "--seq", "2")):
        result = run_cli("audit", *command, "--tenant", ws.tenant.subdomain, "--json", database_url=database_url)
        assert TRACEBACK not in result.stderr, str(result)
        assert result.returncode == 1 and result.error["error"] == "log_mismatch", str(result)


async def test_cli_verify_text_names_a_broken_waiting_entry_and_never_entry_none(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    """docs/audit.md: verify "exits 1 and names the first entry that does not fit", waiting entries included. The
    text report printed "BROKEN at entry None" for an entry not sealed yet (its position is None: only its id
    names it) and for a problem of the head itself, which is no entry at all."""
    ws = await sealed_log(client, factory, db)
    altered = await write_waiting(db, ws)
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.id == altered).values(outcome="refused"))
    result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, database_url=database_url)
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    named = f"id {ledger_keys().entry_ref(ws.org.id, altered)}"
    assert "None" not in result.stdout and named in result.stdout, str(result)

    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.id == altered).values(outcome="allowed"))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                        .values(checkpoint=None))
    result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, database_url=database_url)
    assert result.returncode == 1 and TRACEBACK not in result.stderr, str(result)
    assert "None" not in result.stdout and "not signed" in result.stdout, str(result)


async def test_a_head_whose_frontier_was_rewritten_is_reported_by_verification(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str) -> None:
    """docs/audit.md: before extending a head the sealer checks "that its frontier makes that root"; a head that
    fails "is a log that cannot be extended (the calls are answered, their entries wait, and verification names
    what is wrong)". Verification never looked at the head's frontier: with it rewritten, every later call's
    entry waited for ever while `prism audit verify` and log/verify reported the log valid, and `prism audit
    checkpoint` exported that frontier for `--since FILE`."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        size = (await s.execute(select(audit_heads.c.tree_size).where(
            audit_heads.c.organization_id == ws.org.id))).scalar_one()
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                        .values(frontier=["ab" * 32] * size.bit_count()))
    listed = await post(client, ws, LIST, {})  # a call: answered, its entry left waiting
    assert listed.status_code == 200, listed.text
    report = await ok(client, ws, VERIFY, {"start": "first_entry"})
    assert report["valid"] is False and "frontier" in report["reason"], report
    result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", database_url=database_url)
    assert result.returncode == 1 and not result.json["valid"], str(result)
