"""A prune is attested by the organization's key: deleting a log's entries (all of them, or the first K) and
setting `pruned_through` over a signed checkpoint of that size — the head's own one copied into
`audit_checkpoints`, or one kept every minute — no longer passes for an archive, from the first entry, from
`--since latest` or against a `--checkpoint` of the same size. A log pruned by a Prism before prunes were
attested is attested by the upgrade, as it finds it (docs/audit.md "Archive, prune, retention")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import delete, insert, select, update

from prism.kit.timeutil import utcnow
from prism.ledger.archive import archive
from prism.ledger.checkpoints import parse_checkpoint
from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.ledger.upgrade import attest_logs_as_found
from prism.ledger.verify import LogReport, latest_kept, verify_log
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import seal_waiting, sealed_log
from tests.processes import TRACEBACK, run_cli


async def _head(db: Database, org_id: str) -> Any:
    async with db.read() as s:
        return (await s.execute(select(audit_heads).where(audit_heads.c.organization_id == org_id))).one()


async def _report(db: Database, org_id: str, *, since_latest: bool = False, trusted: Any = None) -> LogReport:
    async with db.read() as s:
        since = await latest_kept(s, org_id) if since_latest else None
        return await verify_log(s, org_id, ledger_keys(), since=since, trusted=trusted)


async def _delete_through(db: Database, org_id: str, through: int, *, copy_head: bool) -> None:
    """What a database writer without the master secret can do: delete entries 1..through and call it a prune,
    over the head's own signed checkpoint copied as the kept one of that size (`copy_head`)."""
    head = await _head(db, org_id)
    async with db.write() as s:
        if copy_head:
            await s.execute(delete(audit_checkpoints).where(audit_checkpoints.c.organization_id == org_id,
                                                            audit_checkpoints.c.tree_size == head.tree_size))
            await s.execute(insert(audit_checkpoints).values(
                organization_id=org_id, tree_size=head.tree_size, root=head.root, frontier=head.frontier,
                checkpoint=head.checkpoint, created_at=utcnow()))
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == org_id,
                                                    audit_entries.c.seq <= through))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == org_id)
                        .values(pruned_through=through))


async def test_a_whole_log_deleted_as_a_prune_is_broken(client: httpx.AsyncClient, factory: Factory, db: Database,
                                                       database_url: str) -> None:
    ws = await sealed_log(client, factory, db, calls=5)
    head = await _head(db, ws.org.id)
    assert head.tree_size >= 5
    await _delete_through(db, ws.org.id, head.tree_size, copy_head=True)
    trusted = parse_checkpoint(head.checkpoint)
    for report in (await _report(db, ws.org.id), await _report(db, ws.org.id, since_latest=True),
                   await _report(db, ws.org.id, trusted=trusted)):
        assert report.valid is False and "no prune by this deployment attests it" in (report.reason or ""), report
    result = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--since", "latest",
                     database_url=database_url)
    assert TRACEBACK not in result.stderr and result.returncode == 1, str(result)
    assert "BROKEN" in result.stdout, str(result)


async def test_the_first_entries_deleted_over_a_kept_checkpoint_are_broken(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    ws = await sealed_log(client, factory, db, calls=3)
    async with db.read() as s:
        kept = min((await s.execute(select(audit_checkpoints.c.tree_size).where(
            audit_checkpoints.c.organization_id == ws.org.id))).scalars())
    await _more_calls(client, db, ws, 3)
    await _delete_through(db, ws.org.id, kept, copy_head=False)
    report = await _report(db, ws.org.id)
    assert report.valid is False and report.first_broken_seq == 1, report


async def test_a_log_deleted_up_to_the_checkpoint_a_verification_starts_from_is_broken(
        client: httpx.AsyncClient, factory: Factory, db: Database) -> None:
    """Without `pruned_through` moved: `--since latest` reads only the entries after the newest kept checkpoint."""
    ws = await sealed_log(client, factory, db, calls=4)
    head = await _head(db, ws.org.id)
    await _delete_through(db, ws.org.id, head.tree_size, copy_head=True)
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id)
                        .values(pruned_through=0))
    report = await _report(db, ws.org.id, since_latest=True)
    assert report.valid is False and report.first_broken_seq == 1, report


async def test_a_real_prune_verifies_and_one_made_before_attested_prunes_is_attested_by_the_upgrade(
        client: httpx.AsyncClient, factory: Factory, db: Database, tmp_path: Path) -> None:
    ws = await sealed_log(client, factory, db, calls=4)
    await archive(db, ws.org.id, ledger_keys(), through=3, out=tmp_path / "a.jsonl", prune=True)
    await _more_calls(client, db, ws, 2)
    assert (await _report(db, ws.org.id)).valid
    async with db.write() as s:  # as a Prism before attested prunes left it
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(pruned_mac=None))
    assert (await _report(db, ws.org.id)).valid is False
    async with db.write() as s:
        prunes, _ = await attest_logs_as_found(s, ledger_keys())
    assert prunes >= 1
    assert (await _report(db, ws.org.id)).valid


async def _more_calls(client: httpx.AsyncClient, db: Database, ws: Workspace, calls: int) -> None:
    for _ in range(calls):
        answer = await client.post("/prism/entity_crud/spare_parts/spare_part/list", json={}, headers=ws.headers())
        assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)
