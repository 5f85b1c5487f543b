"""A checkpoint held outside the database is always compared: with `--since latest` starting past it, the log
cut back to an earlier checkpoint and grown again passed verification."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from sqlalchemy import delete, select, update

from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok
from tests.ledger_support import seal_waiting
from tests.processes import TRACEBACK, cli_json, run_cli

PARTS = "entity_crud/spare_parts/spare_part"


async def _calls(client: httpx.AsyncClient, ws: Workspace, db: Database, n: int) -> None:
    for _ in range(n):
        await ok(client, ws, f"{PARTS}/list", {})
    await seal_waiting(db, ws.org.id)


async def test_a_log_cut_back_and_grown_again_is_caught_against_an_outside_checkpoint_with_since_latest(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    """docs/audit.md: cutting the log back exactly to an earlier signed checkpoint "is caught against any later
    checkpoint held outside the database"; `--checkpoint FILE`: "the log must contain it, with the same root at
    its size". Here the log is cut back to its kept checkpoint of 1 entry, and the running server then seals
    new calls onto the cut log (new heads and kept checkpoints, genuinely signed). The checkpoint of 3 entries
    exported before the cut no longer fits: plain `verify --checkpoint` says so, but with `--since latest`
    (starting after it) the outside checkpoint is never compared and the log is reported valid."""
    ws = await factory.workspace(roles=("owner",))
    await _calls(client, ws, db, 1)  # the first seal keeps a checkpoint of 1 entry
    await _calls(client, ws, db, 2)
    exported = cli_json("audit", "checkpoint", "--tenant", ws.tenant.subdomain, database_url=database_url)
    assert exported["tree_size"] == 3
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(exported))

    async with db.write() as s:  # cut back exactly to the kept checkpoint of 1 entry
        kept = (await s.execute(select(audit_checkpoints).where(
            audit_checkpoints.c.organization_id == ws.org.id, audit_checkpoints.c.tree_size == 1))).one()
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq > 1))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            tree_size=1, root=kept.root, frontier=kept.frontier, checkpoint=kept.checkpoint, checkpointed_at=None))
    await _calls(client, ws, db, 4)  # the server goes on: entries 2..5 on the cut log, a kept checkpoint of 2
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == ws.org.id).values(
            checkpointed_at=None))
    await _calls(client, ws, db, 1)  # and one of 6 (after the outside checkpoint's size)

    full = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--checkpoint", str(outside), "--json",
                   database_url=database_url)
    assert TRACEBACK not in full.stderr and full.returncode == 1, str(full)  # caught from the first entry

    since = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--since", "latest", "--checkpoint",
                    str(outside), "--json", database_url=database_url)
    assert TRACEBACK not in since.stderr, str(since)
    assert since.returncode == 1, str(since)
