"""`prism audit …` on a log it cannot use (sealed with another master secret, a kept checkpoint rewritten) ends
in one clean refusal, `log_broken`, never a traceback; `retain` goes on with the other organizations."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from sqlalchemy import update

from prism.ledger.entries import audit_checkpoints
from prism.models import Organization
from prism.storage import Database
from tests.factories import Factory
from tests.ledger_support import sealed_log
from tests.processes import TRACEBACK, run_cli


async def test_retain_with_another_master_secret_reports_the_log_not_a_traceback(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    """docs/audit.md: a process started with another master secret seals nothing, logs an error and goes on
    with the other logs; `retain` reports a refusal per organization (exit 1) and refusals are one JSON line.
    `_retain_one` seals first and the sealer's BrokenLog (not a PrismError) escapes the per-organization
    savepoint: the whole command dies with a traceback."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        await s.execute(update(Organization).where(Organization.id == ws.org.id).values(audit_retention_days=1))
    result = run_cli("audit", "retain", "--tenant", ws.tenant.subdomain, "--archive-dir", str(tmp_path), "--json",
                     database_url=database_url, PRISM_SECRET_KEY="another-master-secret-" + "x" * 40)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    assert result.returncode == 1, str(result)
    assert '"log_broken"' in result.stdout + result.stderr, str(result)
    assert not any(os.scandir(tmp_path))  # nothing archived from a log this process cannot seal


async def test_archive_with_a_malformed_kept_checkpoint_is_refused_cleanly(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path) -> None:
    """`prism audit archive --through N` where the kept checkpoint of size N was rewritten: the log still
    verifies (kept checkpoints are compared by their root column), then `_stored` parses the text and raises
    MalformedCheckpoint, which the CLI does not catch. docs/audit.md: refusals are one JSON line on stderr with
    --json (`log_broken`, …)."""
    ws = await sealed_log(client, factory, db)
    async with db.write() as s:
        rows = (await s.execute(audit_checkpoints.select().where(
            audit_checkpoints.c.organization_id == ws.org.id))).all()
        size = rows[0].tree_size
        await s.execute(update(audit_checkpoints).where(audit_checkpoints.c.organization_id == ws.org.id,
                                                        audit_checkpoints.c.tree_size == size)
                        .values(checkpoint="{}"))
    result = run_cli("audit", "archive", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--through",
                     str(size), "--out", str(tmp_path / "a.jsonl"), "--json", database_url=database_url)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    assert result.returncode == 1 and result.error["error"], str(result)
