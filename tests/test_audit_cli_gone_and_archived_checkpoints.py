"""`prism audit verify --checkpoint FILE` with a genuine checkpoint of a log the database cannot check it against:
one of an organization deleted with its log is that log BROKEN (exit 1), never a bad argument; one older than a
pruned log's archived range is a bad argument (exit 2) that says to check the archive against it, which
examples/ledger_verifier.py does (docs/audit.md "Verifying")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import orjson
from sqlalchemy import delete

from prism.models import Organization
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import seal_waiting
from tests.processes import TRACEBACK, CliResult, run_cli

VERIFIER = Path(__file__).resolve().parent.parent / "examples" / "ledger_verifier.py"


async def _calls(client: httpx.AsyncClient, db: Database, ws: Workspace, n: int) -> None:
    for _ in range(n):
        answer = await client.post("/prism/entity_crud/spare_parts/spare_part/list", json={}, headers=ws.headers())
        assert answer.status_code == 200, answer.text
    await seal_waiting(db, ws.org.id)


def _audit(database_url: str, *args: str) -> CliResult:
    result = run_cli("audit", *args, database_url=database_url)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    return result


def _exported(database_url: str, ws: Workspace, path: Path) -> Path:
    result = _audit(database_url, "checkpoint", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--json")
    assert result.returncode == 0, str(result)
    path.write_bytes(orjson.dumps(result.json))
    return path


def _verifier(archive: Path, checkpoint: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(VERIFIER), "archive", str(archive), "--checkpoint", str(checkpoint),
                           "--public-key", ledger_keys().public_key_b64], capture_output=True, text=True, check=False)


async def test_a_checkpoint_of_a_deleted_organization_is_its_log_broken(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner",))
    await _calls(client, db, ws, 3)
    checkpoint = _exported(database_url, ws, tmp_path / "cp.json")
    async with db.write() as s:  # what a database writer can do: the organization, and its log with it
        await s.execute(delete(Organization).where(Organization.id == ws.org.id))
    result = _audit(database_url, "verify", "--tenant", ws.tenant.subdomain, "--checkpoint", str(checkpoint))
    assert result.returncode == 1, str(result)
    assert "BROKEN" in result.stdout and "were deleted" in result.stdout, str(result)


async def test_a_checkpoint_older_than_the_archived_range_is_checked_against_the_archive(
        client: httpx.AsyncClient, factory: Factory, db: Database, database_url: str, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner",))
    await _calls(client, db, ws, 1)
    cp1 = _exported(database_url, ws, tmp_path / "cp1.json")
    await _calls(client, db, ws, 3)
    archive = tmp_path / "a.jsonl"
    pruned = _audit(database_url, "archive", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--through", "3",
                    "--out", str(archive), "--prune")
    assert pruned.returncode == 0, str(pruned)
    result = _audit(database_url, "verify", "--tenant", ws.tenant.subdomain, "--checkpoint", str(cp1))
    assert result.returncode == 2 and "older than the archived entries" in result.stderr, str(result)
    assert "ledger_verifier.py archive" in result.stderr and "BROKEN" not in result.stdout, str(result)
    checked = _verifier(archive, cp1)
    assert checked.returncode == 0 and checked.stdout.startswith("OK: "), checked
    forged = {**orjson.loads(cp1.read_bytes()), "tree_size": 2}
    (tmp_path / "forged.json").write_bytes(orjson.dumps(forged))
    refused = _verifier(archive, tmp_path / "forged.json")
    assert refused.returncode == 1 and "FAILED" in refused.stdout, refused
